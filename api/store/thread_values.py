"""A thread's stored values (``threads.state_values``), the checkpoint they are, and its pending
interrupts: the ``SET`` clause and parameters every statement that writes them uses."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from api.store.rows import storable_json, stored_values

VALUES_COLUMNS = """
    state_values = coalesce(%(values)s, state_values),
    state_checkpoint_id = CASE WHEN %(values)s::jsonb IS NULL THEN state_checkpoint_id
                               ELSE %(values_at)s END,
    interrupts = coalesce(%(interrupts)s, interrupts)"""
"""The ``SET`` of a thread's values (with the checkpoint they are, ``api.store.kept_state``)
and interrupts, each left as it is when its parameter is None (``state_columns``)."""


def state_columns(
    values: Any, interrupts: dict[str, Any] | None, values_at: str | None = None
) -> dict[str, Any]:
    """``values`` and ``interrupts`` parameters for a thread's row (None: left as they are), and
    ``values_at``, the root checkpoint whose values they are when the graph ended there (kept
    only when the values are stored as a state answer writes them). What the graph produced
    (model output, tool results) may hold NUL or NaN: written by ``storable_json``, which makes
    them storable as ``storable`` does."""
    stored: Jsonb | None = None
    exact = False
    if values is not None:
        text, exact = stored_values(values)
        stored = Jsonb(text, dumps=_as_written)
    return {
        "values": stored,
        "values_at": values_at if exact else None,
        "interrupts": Jsonb(interrupts, dumps=storable_json) if interrupts is not None else None,
    }


def _as_written(text: bytes) -> bytes:
    return text
