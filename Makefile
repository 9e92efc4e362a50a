# threadline: common tasks. `make run` works on a fresh clone (installs first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install run serve test lint bench eval

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/python -m pip install -e '.[dev]'

run: install
	$(BIN)/threadline run --task counter --param n=5 --param delay=0.2

serve: install
	$(BIN)/threadline serve

test:
	$(BIN)/python -m pytest

lint:
	$(BIN)/ruff check .
	$(BIN)/mypy

bench:
	$(BIN)/python -m bench

eval:
	$(BIN)/python -m eval
