"""Which runs a kill of a server hits: the running runs each server process holds, what a kill
cut short, and the runs a kill now would stall twice in a row (:func:`stalling_again`), which the
soak and the crash mode hold a kill back for."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from api.store.claim_sql import progress_mark


def worker_pid(worker_id: str | None) -> int | None:
    """The process id in a run's ``worker_id`` (``<host>/<pid>/<tag>``); None when it has none."""
    try:
        return int(str(worker_id).split("/")[1])
    except (IndexError, ValueError):
        return None


async def holders(conn: psycopg.AsyncConnection[Any]) -> dict[int, list[dict[str, Any]]]:
    """pid → running runs it holds."""
    cur = await conn.execute("SELECT run_id, attempt, worker_id FROM runs WHERE status = 'running'")
    out: dict[int, list[dict[str, Any]]] = {}
    for row in await cur.fetchall():
        pid = worker_pid(row["worker_id"])
        if pid is not None:
            out.setdefault(pid, []).append(row)
    return out


async def cut_short(conn: psycopg.AsyncConnection[Any], pid: int) -> list[dict[str, Any]]:
    """The running runs process ``pid`` holds, each with its last stored event id (``seq``)."""
    cur = await conn.execute(
        "SELECT r.run_id, r.attempt, (SELECT coalesce(max(e.seq), 0) FROM run_events e"
        "   WHERE e.run_id = r.run_id) AS seq"
        " FROM runs r WHERE r.status = 'running' AND r.worker_id LIKE %s",
        (f"%/{pid}/%",),
    )
    return await cur.fetchall()


STALLING_AGAIN = f"""
SELECT r.run_id, r.worker_id FROM runs r
WHERE r.status = 'running' AND r.stalled_attempts >= 1
  AND r.progress = {progress_mark("r.thread_id")}
"""


async def stalling_again(conn: Any) -> dict[str, str]:
    """Running runs whose previous attempt saved nothing and whose current attempt has saved
    nothing yet either (run id → worker id).

    The service ends a run after ``THREADLINE_MAX_ATTEMPTS`` attempts in a row that saved
    nothing: a run killed at the same step every time. A kill at random moments stalls an
    attempt now and then (one killed before its first save); killing these runs now could
    stall them twice or more in a row, which the soak and the crash mode avoid (they measure
    durability, not that limit): they hold a kill until no run the kill would hit is one of
    these. Then no run ever has more than one stalled attempt in a row, under any limit above 1.
    """
    cur = await conn.execute(STALLING_AGAIN)
    return {str(row["run_id"]): str(row["worker_id"]) for row in await cur.fetchall()}


async def wait_until_no_run_stalls_again(
    database_url: str, pid: int | None = None, *, timeout: float = 60.0
) -> bool:
    """Wait until :func:`stalling_again` names no run (held by ``pid`` when given); False when
    ``timeout`` passed first (a run that does not move on: the kill goes ahead)."""
    deadline = time.monotonic() + timeout
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        while True:
            held = await stalling_again(conn)
            if pid is not None:
                held = {r: w for r, w in held.items() if f"/{pid}/" in w}
            if not held:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
