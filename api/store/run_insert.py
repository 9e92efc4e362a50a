"""Queueing a run: the insert that creates it (pending, or claimed at once by the worker that
will execute it) and marks its thread busy."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, AsyncCursor
from psycopg.types.json import Jsonb

from api.store.claim_sql import progress_mark
from api.store.claimed_run import ClaimedRun
from api.store.rows import run_out

RUNS_CHANNEL = "threadline_runs"


async def insert(conn: AsyncConnection[Any], **fields: Any) -> dict[str, Any]:
    """:func:`send_insert` (with the same arguments), then its row."""
    return await (await send_insert(conn, **fields)).row()


@dataclass
class Inserted:
    """A run's insert, sent; its row is read with :meth:`row` (after the transaction's end, in
    pipeline mode: the insert then goes out with the ``COMMIT``)."""

    run_id: str
    cursor: AsyncCursor[Any]
    claimed: ClaimedRun | None = None
    """Read with the row of a run claimed at once: its first attempt, for its worker (which
    says whether its thread had a checkpoint yet)."""

    async def row(self) -> dict[str, Any]:
        found = await self.cursor.fetchone()
        assert found is not None
        if found["worker_id"] is not None:
            # Claimed at once: the row carries the thread's progress mark, read under its lock.
            self.claimed = ClaimedRun.from_row(found)
        return run_out(found)


async def send_insert(
    conn: AsyncConnection[Any],
    *,
    thread_id: str,
    assistant_id: str,
    kwargs: dict[str, Any],
    metadata: dict[str, Any],
    multitask_strategy: str,
    graph_id: str | None = None,
    start: tuple[str, float] | None = None,
) -> Inserted:
    """Queue a run and mark its thread busy, its metadata naming the run's graph and assistant
    (``graph_id``, ``assistant_id``, as LangGraph Server does: clients such as agent-chat-ui
    list a graph's threads by it); call inside the transaction that checked the thread.
    ``graph_id``: the graph the run executes (None: ``assistant_id`` names a graph).

    ``start`` = ``(worker_id, lease seconds)``: the run is not queued but claimed at once by that
    worker, as its first attempt, exactly as :func:`claim` would take it (the thread has no other
    active run: the caller holds its lock and checked). No worker is notified, and the row says
    whether the thread has a checkpoint yet (:attr:`Inserted.claimed`)."""
    claimed = (
        ", 'running', 1, %(worker)s, now() + make_interval(secs => %(lease)s), "
        + progress_mark("%(thread)s")
        if start
        else ""
    )
    # One statement: the run, the thread marked busy and labelled, the workers notified.
    run_id = uuid.uuid4()
    cur = await conn.execute(
        "WITH ins AS ("
        "  INSERT INTO runs (run_id, thread_id, assistant_id, graph_id, kwargs, metadata,"
        " multitask_strategy"
        + (", status, attempt, worker_id, lease_until, progress" if start else "")
        + ")  VALUES (%(run)s, %(thread)s, %(assistant)s, %(graph)s, %(kwargs)s, %(metadata)s,"
        " %(strategy)s" + claimed + ")  RETURNING *),"
        " busy AS (UPDATE threads SET status = 'busy', updated_at = now(),"
        "  metadata = metadata || %(label)s"
        "  WHERE thread_id = %(thread)s)"
        + " SELECT ins.*"
        + ("" if start else ", pg_notify(%(channel)s, 'new')")
        + " FROM ins",
        {
            "label": Jsonb({"graph_id": graph_id or assistant_id, "assistant_id": assistant_id}),
            "run": run_id,
            "thread": thread_id,
            "assistant": assistant_id,
            "graph": graph_id or assistant_id,
            "kwargs": Jsonb(kwargs),
            "metadata": Jsonb(metadata),
            "strategy": multitask_strategy,
            "channel": RUNS_CHANNEL,
            "worker": start[0] if start else None,
            "lease": start[1] if start else None,
        },
    )
    return Inserted(str(run_id), cur)
