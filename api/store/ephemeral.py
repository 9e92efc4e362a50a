"""Threads made for threadless runs (``on_completion: delete``): found and removed once done."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from api.store.checkpoint_tables import history

DONE = """
SELECT DISTINCT r.thread_id FROM runs r
WHERE r.kwargs ->> 'on_completion' = 'delete'
  AND r.status NOT IN ('pending', 'running')
  AND r.updated_at < now() - make_interval(secs => %(grace)s)
LIMIT %(limit)s
"""
BUSY = """
SELECT 1 FROM runs WHERE thread_id = %(t)s
  AND (status IN ('pending', 'running') OR updated_at >= now() - make_interval(secs => %(grace)s))
LIMIT 1
"""


async def done(conn: AsyncConnection[Any], grace: float, limit: int = 50) -> list[str]:
    """Threads with a finished ``on_completion: delete`` run that ended over ``grace`` ago."""
    cur = await conn.execute(DONE, {"grace": grace, "limit": limit})
    return [str(r["thread_id"]) for r in await cur.fetchall()]


async def remove(conn: AsyncConnection[Any], thread_id: str, grace: float) -> bool:
    """Delete the thread, its runs, events and checkpoints in one transaction, if no run of it
    is active or ended within ``grace`` (checked under the thread's row lock, which a run
    create takes too: a run created meanwhile keeps the thread)."""
    async with conn.transaction():
        cur = await conn.execute(
            "SELECT 1 FROM threads WHERE thread_id = %s FOR UPDATE SKIP LOCKED", (thread_id,)
        )
        if await cur.fetchone() is None:
            return False  # gone, or being changed: the next sweep looks again
        cur = await conn.execute(BUSY, {"t": thread_id, "grace": grace})
        if await cur.fetchone() is not None:
            return False
        await history.delete_threads(conn, [thread_id])
        await conn.execute("DELETE FROM threads WHERE thread_id = %s", (thread_id,))
    return True
