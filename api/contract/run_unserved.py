"""Run fields of LangGraph Server's API that threadline does not serve yet: refused when set,
with the reason, rather than ignored (a client that asked for a delayed start must not be started
now without a word)."""

from __future__ import annotations

from typing import Any


def refuse_unserved(after_seconds: Any, feedback_keys: Any, langsmith_tracer: Any) -> None:
    """Raise ``ValueError`` (a 422 that names the field) for a field set to something this
    server would not do."""
    if after_seconds:
        raise ValueError(
            "after_seconds is not supported: runs start when created; create the run later, "
            "or use a schedule (POST /threads/{thread_id}/runs/crons)"
        )
    if feedback_keys:
        raise ValueError(
            "feedback_keys is not supported: this server creates no LangSmith feedback tokens"
        )
    if langsmith_tracer:
        raise ValueError(
            "langsmith_tracer is not supported: this server sends no traces to LangSmith; "
            "trace from the graph's own process (LANGSMITH_TRACING in its environment)"
        )
