"""A run's webhook payload, in LangGraph Server's shape: the run (as ``GET`` shows it) with its
final ``status``, ``run_started_at`` (its last attempt's start), ``run_ended_at``,
``webhook_sent_at``, ``values`` (the thread's state when the run ended, also when it failed or
was cancelled) and, unless it succeeded, ``error``: ``{"error": <class name>, "message": ...}``,
as the run's ``error`` stream event says it (a cancelled run's is ``UserInterrupt``).

What only the run's end knows (its values, its error) is recorded then, in its outbox row
(:func:`outcome`, ``api.store.webhooks``); the rest is put together when it is sent."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from api.contract.runs import Run
from api.durable.run_events import ErrorEvent
from api.engine.runtime import Runtime
from api.platform.db_health import is_database_fault
from api.platform.serde import to_jsonable
from api.store.claimed_run import ClaimedRun
from api.store.rows import iso, run_out

logger = logging.getLogger(__name__)


async def outcome(
    runtime: Runtime,
    run: ClaimedRun,
    status: str,
    error: str | None,
    values: Any,
    failure: ErrorEvent | None,
) -> dict[str, Any] | None:
    """What the end of ``run`` records for its webhook; None when it has none. ``values``: the
    state it ended with (None: read the thread's latest); ``failure``: its ``error`` event."""
    if not run.kwargs.get("webhook"):
        return None
    if values is None:
        values = await _latest_values(runtime, run)
    recorded: dict[str, Any] = {"values": to_jsonable(values) if values is not None else None}
    if status != "success":
        recorded["error"] = dict(failure) if failure else _error(status, error)
    return recorded


def _error(status: str, error: str | None) -> dict[str, str]:
    name = "UserInterrupt" if status == "interrupted" else "Error"
    return {"error": name, "message": error or status}


async def _latest_values(runtime: Runtime, run: ClaimedRun) -> Any:
    graph = runtime.graphs.get(run.graph_id)
    if graph is None:
        return None
    try:
        state = await graph.aget_state({"configurable": {"thread_id": run.thread_id}})
    except Exception as err:  # the webhook goes without them rather than the run not ending
        if is_database_fault(err):
            raise  # the run is handed back (api.engine.worker), and its end is written again later
        logger.warning("run %s: its webhook's values could not be read (%s)", run.run_id, err)
        return None
    return state.values if state.created_at is not None else None


def payload(row: dict[str, Any], sent_at: datetime) -> dict[str, Any]:
    """The body POSTed for an outbox row (``api.store.webhooks``): the run's fields are those
    of the API's ``Run``."""
    run = dict(row["run"])
    for key in ("created_at", "updated_at"):
        run[key] = datetime.fromisoformat(run[key])
    shown = run_out(run)
    body = {
        **{key: shown[key] for key in Run.model_fields if key in shown},
        "status": run["status"],
        "run_started_at": iso(row["run_started_at"]),
        "run_ended_at": iso(row["run_ended_at"]),
        "webhook_sent_at": iso(sent_at),
        "values": row["outcome"].get("values"),
    }
    body.pop("error", None)  # the run's own is text; LangGraph's is only there on failure
    if "error" in row["outcome"]:
        body["error"] = row["outcome"]["error"]
    return body
