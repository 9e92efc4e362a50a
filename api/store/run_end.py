"""A run's end in one statement: its last events (the ``end`` among them), its final status, and
its thread's status and values, and its webhook's outbox row.

Sent as separate statements in one transaction, that was ``BEGIN``, three statements and
``COMMIT``. As one ``UPDATE`` with data-modifying ``WITH`` clauses it is one message and one
implicit transaction, fenced like a step (``events.FENCED_EVENTS_CTE``): an attempt that lost its
run changes nothing. All clauses see the same snapshot, so the thread's "still busy" check leaves
out the run that is ending (the separate statements saw its new status).
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection

from api.store.events import FENCED_EVENTS_CTE, EventRows
from api.store.thread_values import VALUES_COLUMNS, state_columns
from api.store.webhooks import OUTBOX_CTE, outbox_params

_FINISHED = """
finished AS (
    UPDATE runs SET status = %(status)s, error = %(error)s, lease_until = NULL,
        updated_at = now()
    WHERE run_id = %(run)s AND (SELECT true FROM fence)
    RETURNING {returning})"""
_THREAD = f"""
UPDATE threads SET
    status = CASE
        WHEN EXISTS (SELECT 1 FROM runs WHERE thread_id = %(thread)s AND run_id <> %(run)s
                     AND status IN ('pending', 'running')) THEN 'busy'
        ELSE coalesce(%(after)s, status) END,
    {VALUES_COLUMNS.strip()},
    updated_at = now()
WHERE thread_id = %(thread)s AND EXISTS (SELECT 1 FROM finished)
RETURNING status
"""
_FINISH = "WITH" + FENCED_EVENTS_CTE + _FINISHED.format(returning="run_id") + _THREAD
_FINISH_HOOKED = (
    "WITH" + FENCED_EVENTS_CTE + _FINISHED.format(returning="*") + "," + OUTBOX_CTE + _THREAD
)
"""With the outbox row of a run that has a webhook (``hook`` set): the whole run row goes
into it."""


async def finish(
    conn: AsyncConnection[Any],
    events: EventRows,
    *,
    thread_id: str,
    status: str,
    error: str | None,
    after: str,
    values: Any = None,
    values_at: str | None = None,
    interrupts: dict[str, Any] | None = None,
    hook: dict[str, Any] | None = None,
) -> str | None:
    """Store ``events`` (fenced: raises when the attempt no longer holds the run, and then
    nothing changes), end the run with ``status``, and set its thread's status (``after``, or
    busy while another run is active) and values (``values_at``: the root checkpoint they are,
    when the graph ended there); returns the thread's new status (None: no
    such thread). A run with a webhook gets its outbox row, with ``hook`` (its values and
    error, ``api.engine.webhook_payload``)."""
    params = {
        **events.params(),
        **state_columns(values, interrupts, values_at),
        **outbox_params(hook),
        "run": uuid.UUID(events.run_id),
        "status": status,
        "error": error,
        "thread": thread_id,
        "after": after,
    }
    sql = _FINISH_HOOKED if hook is not None else _FINISH
    row = await (await conn.execute(sql, params)).fetchone()
    return str(row["status"]) if row else None
