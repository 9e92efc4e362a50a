"""The durable event log: every stream chunk of a run, stored before it is sent."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
from psycopg import AsyncConnection

EVENTS_CHANNEL = "threadline_events"

_INSERT = """
events AS (
    INSERT INTO run_events (run_id, seq, event, data, attempt)
    SELECT %(run)s, (e->>0)::bigint, e->>1, e->2, %(attempt)s
    FROM json_array_elements(%(events)s::json) AS e
    WHERE EXISTS (SELECT 1 FROM runs WHERE run_id = %(run)s AND attempt = %(attempt)s
                  AND status = 'running')
    RETURNING seq)"""
"""A batch's insert (:meth:`EventRows.params`), fenced: a worker that lost its lease (another
took the run over) stores none of it."""

_COUNTED = """
    CASE WHEN c.n > 0 AND %(notify)s THEN pg_notify(%(channel)s, %(run)s::text || ':' || c.last) END
    FROM (SELECT count(*) AS n, max(seq) AS last FROM events) c"""
"""One notification for the whole batch, naming its last event, when another process listens
(:attr:`EventRows.notify`)."""

APPEND_BATCH = f"WITH{_INSERT}\nSELECT c.n,{_COUNTED}"
"""The caller reads how many events were stored: fewer than the batch's means fenced out."""

FENCE_SQLSTATE = "TL001"

FENCED_EVENTS_CTE = (
    f"{_INSERT},\nfence AS (\n    SELECT threadline_fence(c.n, %(expected)s, %(run)s),{_COUNTED}),"
)
"""The same insert as ``WITH`` clauses, for a statement of the caller's (a step's,
``api.store.checkpoint_tables.step``; a run's end, ``api.store.run_end``): its ``fence`` fails
the whole statement when the attempt does not hold the run."""


@dataclass
class EventRows:
    """A batch of one attempt's events, to be stored by a statement of the caller's (a step's
    checkpoint, ``api.store.checkpoint_tables.step``; its end, ``api.store.run_end``), fenced by
    :data:`FENCED_EVENTS_CTE`."""

    run_id: str
    attempt: int
    batch: list[tuple[int, str, str]]
    notify: bool = True
    """Whether the batch's commit notifies: only another process's streams need it (this
    process's get the batch from memory, ``api.durable.hub.Hub.publish``). A notifying commit takes
    PostgreSQL's one lock on the notification queue and holds it through the commit's flush, so
    concurrent runs' steps would wait for each other there (``api.durable.hub.Hub.peers``)."""

    def params(self) -> dict[str, Any]:
        """``run``, ``attempt``, ``expected``, ``channel``, ``notify`` and ``events``: a JSON
        array of ``[seq, event, data]`` (each event's data is JSON already, and goes in as it
        is)."""
        rows = ",".join(
            f"[{seq},{orjson.dumps(event).decode()},{data}]" for seq, event, data in self.batch
        )
        return {
            "run": uuid.UUID(self.run_id),
            "attempt": self.attempt,
            "expected": len(self.batch),
            "channel": EVENTS_CHANNEL,
            "notify": self.notify,
            "events": f"[{rows}]",
        }


class LostRun(Exception):
    """This worker no longer owns the run (its lease expired and another worker took it)."""


async def append_batch(
    conn: AsyncConnection[Any],
    run_id: str,
    attempt: int,
    batch: list[tuple[int, str, str]],
    *,
    notify: bool = True,
) -> None:
    """Store events ``(seq, event, data JSON)`` and notify listeners once (``notify``: see
    :attr:`EventRows.notify`); raises LostRun when fenced out (then nothing of the batch is
    stored)."""
    cur = await conn.execute(APPEND_BATCH, EventRows(run_id, attempt, batch, notify).params())
    row = await cur.fetchone()
    if row is None or row["n"] != len(batch):
        raise LostRun(run_id)


def is_fenced_out(err: BaseException) -> bool:
    """Whether ``err`` is the fence of :data:`FENCED_EVENTS_CTE` refusing a batch."""
    return isinstance(err, psycopg.Error) and err.sqlstate == FENCE_SQLSTATE


async def append(
    conn: AsyncConnection[Any], run_id: str, seq: int, event: str, data_json: str, attempt: int
) -> None:
    """Store one event (a batch of one)."""
    await append_batch(conn, run_id, attempt, [(seq, event, data_json)])


async def append_unfenced(
    conn: AsyncConnection[Any], run_id: str, event: str, data_json: str, attempt: int
) -> int:
    """Store an event for a run no worker holds (cancelled before it started, attempts spent)."""
    cur = await conn.execute(
        "INSERT INTO run_events (run_id, seq, event, data, attempt)"
        " SELECT %(run)s, coalesce(max(seq), 0) + 1, %(event)s, %(data)s::json, %(attempt)s"
        " FROM run_events WHERE run_id = %(run)s RETURNING seq",
        {"run": uuid.UUID(run_id), "event": event, "data": data_json, "attempt": attempt},
    )
    row = await cur.fetchone()
    assert row is not None
    await conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, f"{run_id}:{row['seq']}"))
    return int(row["seq"])


async def last_seq(conn: AsyncConnection[Any], run_id: str) -> int:
    cur = await conn.execute(
        "SELECT coalesce(max(seq), 0) AS seq FROM run_events WHERE run_id = %s",
        (uuid.UUID(run_id),),
    )
    row = await cur.fetchone()
    return int(row["seq"]) if row else 0


async def last_seqs(conn: AsyncConnection[Any], run_ids: list[str]) -> dict[str, int]:
    """Of ``run_ids``, the runs that exist, each with its last stored sequence number (0: no
    event yet); one statement for all of them."""
    cur = await conn.execute(
        "SELECT r.run_id::text AS run_id,"
        " (SELECT coalesce(max(e.seq), 0) FROM run_events e WHERE e.run_id = r.run_id) AS seq"
        " FROM runs r WHERE r.run_id = ANY(%s)",
        ([uuid.UUID(r) for r in run_ids],),
    )
    return {row["run_id"]: int(row["seq"]) for row in await cur.fetchall()}


async def read(
    conn: AsyncConnection[Any], run_id: str, after: int, limit: int = 500
) -> list[dict[str, Any]]:
    """Events after ``after``, oldest first; ``data`` comes back as JSON text, ready to send."""
    cur = await conn.execute(
        "SELECT seq, event, data::text AS data FROM run_events"
        " WHERE run_id = %s AND seq > %s ORDER BY seq LIMIT %s",
        (uuid.UUID(run_id), after, limit),
    )
    return list(await cur.fetchall())


async def has_end(conn: AsyncConnection[Any], run_id: str) -> bool:
    """Whether the run's ``end`` event is stored."""
    cur = await conn.execute(
        "SELECT 1 FROM run_events WHERE run_id = %s AND event = 'end'", (uuid.UUID(run_id),)
    )
    return await cur.fetchone() is not None


async def stored_updates(conn: AsyncConnection[Any], run_id: str) -> list[tuple[str, str]]:
    """``(event, JSON)`` of every ``updates`` event the run has stored, its subgraphs'
    (``updates|<namespace>``) included: the takeover dedupe's input."""
    cur = await conn.execute(
        "SELECT event, data::text AS data FROM run_events WHERE run_id = %s"
        " AND (event = 'updates' OR event LIKE 'updates|%%')",
        (uuid.UUID(run_id),),
    )
    return [(row["event"], row["data"]) for row in await cur.fetchall()]


async def end_at_or_before(
    conn: AsyncConnection[Any], run_id: str, seq: int
) -> list[dict[str, Any]]:
    """The run's ``end`` event if it is stored at or before ``seq``."""
    cur = await conn.execute(
        "SELECT seq, event, data::text AS data FROM run_events"
        " WHERE run_id = %s AND event = 'end' AND seq <= %s",
        (uuid.UUID(run_id), seq),
    )
    return list(await cur.fetchall())
