"""The service's own events in a run's stream, besides the graph's chunks.

Every stream starts with ``metadata`` (per attempt) and ends with exactly one ``end``; ``error``
comes before an ``end`` whose status is ``error``. The graph's chunks are named for their stream
mode (``values``, ``updates``, ``custom``, ``messages``, ...).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

RunStatus = Literal["pending", "running", "success", "error", "interrupted"]


class MetadataEvent(TypedDict):
    """An attempt started: ``attempt`` above 1 means the run was taken over or resumed."""

    run_id: str
    attempt: int


class ErrorEvent(TypedDict):
    """Why the run failed: the exception's class name (or ``AttemptsExhausted``) and message."""

    error: str
    message: str


class EndEvent(TypedDict):
    """The run's last event: its final status, and for ``error`` or a cancel, why."""

    run_id: str
    status: RunStatus
    error: NotRequired[str | None]


def end_event(run_id: str, status: RunStatus, error: str | None = None) -> EndEvent:
    """The ``end`` payload (built here only)."""
    end: EndEvent = {"run_id": run_id, "status": status}
    if error:
        end["error"] = error
    return end
