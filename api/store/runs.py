"""The run queue: create, claim with ``FOR UPDATE SKIP LOCKED``, lease, finish, cancel."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection

from api.store import threads
from api.store.claim_sql import CLAIM, progress_mark
from api.store.claimed_run import ClaimedRun
from api.store.rows import run_out, thread_out

# Queueing a run is in api.store.run_insert; callers know it as part of the run queue.
from api.store.run_insert import RUNS_CHANNEL as RUNS_CHANNEL
from api.store.run_insert import Inserted as Inserted
from api.store.run_insert import insert as insert
from api.store.run_insert import send_insert as send_insert


async def lock_thread(conn: AsyncConnection[Any], thread_id: str) -> list[dict[str, Any]] | None:
    """Lock the thread's row (inside a transaction) and return its active runs (run_id, status),
    oldest first; None when there is no such thread.

    Two statements: under READ COMMITTED, one that waited for the lock would read the runs
    with the snapshot it took before waiting, missing a run the lock's holder just queued. Both
    are sent before either result is read: in pipeline mode (``pipelined_transaction``) they
    go out together, with the ``BEGIN`` before them."""
    return (await _lock(conn, thread_id, "1"))[1]


async def lock_and_read_thread(
    conn: AsyncConnection[Any], thread_id: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """:func:`lock_thread`, and the thread as ``threads.get`` reads it for a run's checks
    (values without their lists; None: no such thread), in the same round trip."""
    row, active = await _lock(conn, thread_id, f"{threads.FOR_CHECKS}, {threads.LAST_RUN}")
    return (thread_out(row) if row is not None else None), active


ACTIVE = (
    "SELECT (SELECT coalesce(json_agg(json_build_object('run_id', run_id, 'status', status)"
    " ORDER BY created_at), '[]') FROM runs"
    " WHERE thread_id = %(thread)s AND status IN ('pending', 'running')) AS active"
)
"""The thread id's active runs, oldest first, as one JSON array: one row even when there is no
such thread."""


async def _lock(
    conn: AsyncConnection[Any], thread_id: str, columns: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    locked = await conn.execute(
        f"SELECT {columns} FROM threads t WHERE t.thread_id = %s FOR UPDATE OF t", (thread_id,)
    )
    # After the lock, in a statement of its own: what it reads is as of the lock's grant.
    after = await conn.execute(ACTIVE, {"thread": thread_id})
    row = await locked.fetchone()
    read = await after.fetchone()
    assert read is not None
    if row is None:
        return None, None
    return row, [{"run_id": r["run_id"], "status": r["status"]} for r in read["active"]]


async def get(conn: AsyncConnection[Any], thread_id: str, run_id: str) -> dict[str, Any] | None:
    try:
        rid = uuid.UUID(run_id)
    except ValueError:
        return None
    cur = await conn.execute(
        "SELECT * FROM runs WHERE run_id = %s AND thread_id = %s", (rid, thread_id)
    )
    row = await cur.fetchone()
    return run_out(row) if row else None


async def list_for_thread(
    conn: AsyncConnection[Any], thread_id: str, *, limit: int, offset: int, status: str | None
) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT * FROM runs WHERE thread_id = %s AND (%s::text IS NULL OR status = %s)"
        " ORDER BY created_at DESC LIMIT %s OFFSET %s",
        (thread_id, status, status, limit, offset),
    )
    return [run_out(r) for r in await cur.fetchall()]


async def claim(
    conn: AsyncConnection[Any],
    worker_id: str,
    lease: float,
    limit: int = 1,
    executing: list[str] | None = None,
) -> list[tuple[ClaimedRun, int]]:
    """Take up to ``limit`` of the oldest runnable runs (pending, or running with an expired
    lease), at most one per thread; each with the last sequence number of its event log.
    ``executing``: the runs the claiming process is executing, never taken again by it.

    Each run is the :class:`ClaimedRun` its worker executes, which also says
    ``stalled_attempts``: how many attempts in a row before this one ended without saving
    anything (see :func:`progress_mark`), and ``no_checkpoint``: it is the run's first attempt
    and its thread had no checkpoint when it was claimed (the mark, read in the claim's
    statement), as a run committed as claimed says (``api.durable.run_memory.NoCheckpointYet``).
    A later attempt reads the thread: the one before may have saved meanwhile."""
    cur = await conn.execute(
        CLAIM,
        {
            "worker": worker_id,
            "lease": lease,
            "limit": limit,
            "executing": [uuid.UUID(r) for r in executing or []],
        },
    )
    rows = await cur.fetchall()
    return sorted(
        ((ClaimedRun.from_row(r), int(r["last_seq"])) for r in rows),
        key=lambda p: p[0].created_at,
    )


async def renew(
    conn: AsyncConnection[Any], worker_id: str, lease: float, run_ids: list[str]
) -> dict[str, tuple[int, bool, bool]]:
    """Extend the leases of the runs this worker executes; returns run id → (attempt, cancel
    requested, still running). Only the ids it names: a run whose execution ended without
    finishing it must see its lease expire, not be kept alive forever. A run this worker has
    just finished (its task not over yet) is returned as not running: it was not lost."""
    cur = await conn.execute(
        "UPDATE runs SET lease_until = CASE WHEN status = 'running'"
        " THEN now() + make_interval(secs => %s) ELSE lease_until END"
        " WHERE worker_id = %s AND run_id = ANY(%s)"
        " RETURNING run_id, attempt, cancel_requested, status = 'running' AS running",
        (lease, worker_id, [uuid.UUID(r) for r in run_ids]),
    )
    return {
        str(r["run_id"]): (r["attempt"], r["cancel_requested"], r["running"])
        for r in await cur.fetchall()
    }


async def release(conn: AsyncConnection[Any], run_id: str, attempt: int, worker_id: str) -> None:
    """Hand a run back (shutdown): another worker claims it at once, as its next attempt.

    A handed-back attempt did not fail: the next claim does not judge it (``progress`` NULL),
    and if it saved something, the attempts before it no longer count as stalled either."""
    await conn.execute(
        "UPDATE runs SET status = 'pending', worker_id = NULL, lease_until = NULL,"
        " handbacks = handbacks + 1, updated_at = now(),"
        " stalled_attempts = CASE WHEN progress IS DISTINCT FROM "
        + progress_mark("runs.thread_id")
        + " THEN 0 ELSE stalled_attempts END, progress = NULL"
        " WHERE run_id = %s AND attempt = %s AND worker_id = %s",
        (uuid.UUID(run_id), attempt, worker_id),
    )
    await conn.execute("SELECT pg_notify(%s, %s)", (RUNS_CHANNEL, "new"))


async def give_up(conn: AsyncConnection[Any], run_id: str, attempt: int, worker_id: str) -> None:
    """End this worker's lease of a run now, without handing it back: the next claim takes it
    at once and judges the attempt as one that died (stalled if it saved nothing)."""
    await conn.execute(
        "UPDATE runs SET lease_until = now() - interval '1 second'"
        " WHERE run_id = %s AND attempt = %s AND worker_id = %s AND status = 'running'",
        (uuid.UUID(run_id), attempt, worker_id),
    )
    await conn.execute("SELECT pg_notify(%s, %s)", (RUNS_CHANNEL, "new"))


async def expire_dead_workers(conn: AsyncConnection[Any], alive: Any, host_prefix: str) -> int:
    """Expire the leases of runs held by processes of this host that no longer exist."""
    cur = await conn.execute(
        "SELECT run_id, worker_id FROM runs WHERE status = 'running' AND worker_id LIKE %s",
        (host_prefix + "%",),
    )
    dead = [r["run_id"] for r in await cur.fetchall() if not alive(r["worker_id"])]
    if dead:
        await conn.execute(
            "UPDATE runs SET lease_until = now() - interval '1 second' WHERE run_id = ANY(%s)"
            " AND status = 'running'",
            (dead,),
        )
        await conn.execute("SELECT pg_notify(%s, %s)", (RUNS_CHANNEL, "new"))
    return len(dead)


async def request_cancel(conn: AsyncConnection[Any], run_id: str) -> dict[str, Any] | None:
    """Mark a run cancelled: a pending one ends now, a running one at its worker's next check."""
    async with conn.transaction():
        cur = await conn.execute(
            "UPDATE runs SET cancel_requested = true, updated_at = now(),"
            " status = CASE WHEN status = 'pending' THEN 'interrupted' ELSE status END,"
            " error = CASE WHEN status = 'pending' THEN 'cancelled before it started'"
            "              ELSE error END"
            " WHERE run_id = %s AND status IN ('pending', 'running') RETURNING *",
            (uuid.UUID(run_id),),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        if row["status"] == "interrupted":
            await threads.refresh_status(conn, row["thread_id"], after="idle")
        await conn.execute("SELECT pg_notify(%s, %s)", (RUNS_CHANNEL, f"cancel:{row['run_id']}"))
    return run_out(row)


async def finish(conn: AsyncConnection[Any], run_id: str, status: str, error: str | None) -> None:
    """Set the run's final status and drop its lease (in the transaction storing its end)."""
    await conn.execute(
        "UPDATE runs SET status = %s, error = %s, lease_until = NULL, updated_at = now()"
        " WHERE run_id = %s",
        (status, error, uuid.UUID(run_id)),
    )


async def by_id(conn: AsyncConnection[Any], run_id: str) -> dict[str, Any] | None:
    """A run by its id alone, as the API shows it."""
    cur = await conn.execute("SELECT * FROM runs WHERE run_id = %s", (uuid.UUID(run_id),))
    row = await cur.fetchone()
    return run_out(row) if row else None


async def latest_assistant(conn: AsyncConnection[Any], thread_id: str) -> dict[str, Any] | None:
    """The assistant and the graph of the thread's latest run (``assistant_id``, ``graph_id``)."""
    cur = await conn.execute(
        "SELECT assistant_id, graph_id FROM runs WHERE thread_id = %s"
        " ORDER BY created_at DESC LIMIT 1",
        (thread_id,),
    )
    return await cur.fetchone()


async def labelled_graph(conn: AsyncConnection[Any], thread_id: str) -> str | None:
    """The graph the thread's metadata names (its runs label it, a copy keeps it): ``graph_id``,
    else ``assistant_id`` (which named the graph before assistants were stored)."""
    cur = await conn.execute(
        "SELECT coalesce(metadata->>'graph_id', metadata->>'assistant_id') AS g FROM threads"
        " WHERE thread_id = %s",
        (thread_id,),
    )
    row = await cur.fetchone()
    return row["g"] if row else None


async def active(conn: AsyncConnection[Any], thread_id: str) -> dict[str, Any] | None:
    """The thread's oldest active (pending or running) run."""
    cur = await conn.execute(
        "SELECT * FROM runs WHERE thread_id = %s AND status IN ('pending', 'running')"
        " ORDER BY created_at LIMIT 1",
        (thread_id,),
    )
    row = await cur.fetchone()
    return run_out(row) if row else None


async def delete_finished(conn: AsyncConnection[Any], thread_id: str, run_ids: list[str]) -> int:
    """Delete these runs of the thread (their events go with them) unless still active."""
    cur = await conn.execute(
        "DELETE FROM runs WHERE thread_id = %s AND run_id = ANY(%s)"
        " AND status NOT IN ('pending', 'running')",
        (thread_id, [uuid.UUID(r) for r in run_ids]),
    )
    return cur.rowcount


async def active_ids(
    conn: AsyncConnection[Any], thread_id: str, *, uncancelled: bool = False
) -> list[str]:
    """The thread's pending and running runs, oldest first (``uncancelled``: only those no
    cancel was requested for)."""
    cur = await conn.execute(
        "SELECT run_id FROM runs WHERE thread_id = %s AND status IN ('pending', 'running')"
        " AND NOT (%s AND cancel_requested) ORDER BY created_at",
        (thread_id, uncancelled),
    )
    return [str(r["run_id"]) for r in await cur.fetchall()]


async def rollbacks_of(conn: AsyncConnection[Any], run_ids: list[str]) -> list[str]:
    """The runs these runs were to roll back (``kwargs.rollback``): a rollback cancelled before
    it started hands them on."""
    cur = await conn.execute(
        "SELECT DISTINCT jsonb_array_elements_text(kwargs -> 'rollback') AS run_id FROM runs"
        " WHERE run_id = ANY(%s) AND jsonb_typeof(kwargs -> 'rollback') = 'array'",
        ([uuid.UUID(r) for r in run_ids],),
    )
    return [str(r["run_id"]) for r in await cur.fetchall()]
