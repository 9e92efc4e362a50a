"""Logs: every line about a run carries its ``run_id``, ``thread_id`` and ``attempt``; text or
JSON lines (``THREADLINE_LOG_FORMAT``).

The worker binds the run to the asyncio task that executes an attempt (:func:`bind_run`, a
``contextvars`` variable), so everything logged while the attempt runs (the executor, the graph,
its tools, tasks they start) carries the run's fields; :class:`RunFilter`, on the handler,
copies them onto each record. ``threadline serve`` installs the handler
(:func:`configure_logging`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
RUN_FIELDS = ("run_id", "thread_id", "attempt")


@dataclass(frozen=True)
class RunFields:
    run_id: str
    thread_id: str
    attempt: int


CURRENT_RUN: ContextVar[RunFields | None] = ContextVar("threadline_run", default=None)
"""The run the current task works on, if any."""


def bind_run(run_id: str, thread_id: str, attempt: int) -> None:
    """Mark the current context (an attempt's own task) as working on attempt ``attempt`` of run
    ``run_id``, on thread ``thread_id``."""
    CURRENT_RUN.set(RunFields(run_id, thread_id, attempt))


@contextlib.contextmanager
def run_context(run_id: str, thread_id: str, attempt: int) -> Iterator[None]:
    """The same for a block of code in a task that is not the attempt's own."""
    token = CURRENT_RUN.set(RunFields(run_id, thread_id, attempt))
    try:
        yield
    finally:
        CURRENT_RUN.reset(token)


class RunFilter(logging.Filter):
    """Sets ``run_id``, ``thread_id`` and ``attempt`` on every record (None outside a run),
    unless the call gave them itself (``extra=``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = CURRENT_RUN.get()
        for name in RUN_FIELDS:
            if not hasattr(record, name):
                setattr(record, name, getattr(fields, name) if fields else None)
        return True


class TextFormatter(logging.Formatter):
    """The usual line, then ``run_id=... thread_id=... attempt=N`` when it is about a run."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if getattr(record, "run_id", None) is None:
            return line
        fields = " ".join(f"{name}={getattr(record, name, None)}" for name in RUN_FIELDS)
        first, newline, rest = line.partition("\n")  # after the message, before a traceback
        return f"{first} {fields}{newline}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``timestamp`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, the run's fields when it is about one, ``exception`` and ``stack`` when set."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in RUN_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def handler(log_format: LogFormat) -> logging.Handler:
    """A standard-error handler in ``log_format`` that adds the run's fields."""
    out = logging.StreamHandler(sys.stderr)
    out.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    out.addFilter(RunFilter())
    return out


def configure_logging(level: str, log_format: LogFormat) -> None:
    """The process's logging: one handler on the root logger (replacing any)."""
    logging.basicConfig(level=level.upper(), handlers=[handler(log_format)], force=True)


def uvicorn_log_config(log_format: LogFormat) -> dict[str, Any]:
    """``log_config`` for uvicorn: in JSON, its loggers keep no handlers of their own and
    propagate to the root's, so its lines are JSON too; in text, its default."""
    if log_format != "json":
        from uvicorn.config import LOGGING_CONFIG

        return LOGGING_CONFIG
    own = {"handlers": [], "propagate": True}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "loggers": {"uvicorn": own, "uvicorn.error": own, "uvicorn.access": own},
    }
