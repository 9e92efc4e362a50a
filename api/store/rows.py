"""Row → API object conversions shared by the stores."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from api.platform import jsonb
from api.platform.serde import graph_json, to_jsonable


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def run_out(row: dict[str, Any]) -> dict[str, Any]:
    """A ``runs`` row as the API's ``Run``."""
    return {
        "run_id": str(row["run_id"]),
        "thread_id": row["thread_id"],
        "assistant_id": row["assistant_id"],
        # The graph it executes (not in the API's ``Run``: the routes' response model drops it).
        "graph_id": row.get("graph_id") or row["assistant_id"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "status": row["status"],
        "metadata": row["metadata"],
        "multitask_strategy": row["multitask_strategy"],
        "kwargs": row["kwargs"],
        "attempt": row["attempt"],
        "handbacks": row.get("handbacks", 0),
        "error": row["error"],
    }


def thread_out(row: dict[str, Any]) -> dict[str, Any]:
    """A ``threads`` row as the API's ``Thread``."""
    return {
        "thread_id": row["thread_id"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "metadata": row["metadata"],
        "status": row["status"],
        "values": row.get("state_values"),
        "interrupts": row.get("interrupts") or {},
        "last_run": row.get("last_run"),
        "owner": row.get("owner"),
    }


def storable_json(value: Any) -> bytes:
    """``value`` (JSON data, or a graph's values: messages and what ``to_jsonable`` takes) as
    JSON that ``jsonb`` takes, as :func:`storable` makes it: in one pass when orjson can write
    it, each message as pydantic's JSON (a long thread's values are its whole message list),
    else after ``to_jsonable`` and the walk (``api.platform.jsonb``)."""
    return stored_values(value)[0]


def stored_values(values: Any) -> tuple[bytes, bool]:
    """``values`` as JSON that ``jsonb`` takes (what :func:`storable_json` returns), and whether
    that is also exactly what a state answer writes of them (``graph_json``, nothing replaced to
    make it storable): only then can the stored values answer for the checkpoint they came from
    (``api.store.kept_state``)."""
    try:
        text = graph_json(values)
    except TypeError:
        return jsonb.dumps(storable(to_jsonable(values))), False
    stored = jsonb.storable_text(text)
    return stored, stored is text


def storable(value: Any) -> Any:
    """``value`` with NUL characters replaced (U+FFFD) in every string and non-finite numbers
    (NaN, infinities) as null: ``jsonb`` can hold neither, and what a model or a tool produced
    must not break the record of a run."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return value.replace("\0", "\ufffd") if "\0" in value else value
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value
