# threadline: common tasks. `make run` works on a fresh clone (installs first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install run serve test lint bench eval real-model

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/threadline run --task counter --param n=5 --param delay=0.2

serve: install
	$(BIN)/threadline serve

# Two test processes (one per core of CI's machine), a test file per process at a time: about 9.5 min
# here. TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 2
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Both graphs (counter, nowork) by default; e.g. `make bench BENCH_ARGS="--quick"`.
bench: install
	$(BIN)/python -m bench --graph both $(BENCH_ARGS)

eval: install
	$(BIN)/python -m eval --suite full

# Opt-in, not part of `make test`: llama.cpp's server with SmolLM2-135M-Instruct (built into
# .venv-llama on first use, or LLAMA_VENV=/path reuses one), the real-server test, then the
# evaluation → eval/REPORT-smollm2.md. REAL_MODEL_ARGS: e.g. "--suite small --reps 1".
real-model: install
	$(BIN)/python -m eval.llama_server run $(if $(LLAMA_VENV),--venv $(LLAMA_VENV)) $(REAL_MODEL_ARGS)
