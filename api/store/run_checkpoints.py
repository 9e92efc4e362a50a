"""Checkpoints by the run that saved them (a rolled-back run's go with it)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

DELETE_WRITES = """
DELETE FROM checkpoint_writes w USING checkpoints c
WHERE c.thread_id = %(t)s AND c.metadata ->> 'run_id' = ANY(%(runs)s)
  AND w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
  AND w.checkpoint_id = c.checkpoint_id
"""
DELETE_CHECKPOINTS = """
DELETE FROM checkpoints WHERE thread_id = %(t)s AND metadata ->> 'run_id' = ANY(%(runs)s)
"""


async def delete_of_runs(conn: AsyncConnection[Any], thread_id: str, run_ids: list[str]) -> int:
    """Delete the thread's checkpoints (every namespace) saved by these runs, and their writes;
    the number of checkpoints deleted. Blobs no checkpoint uses any more stay until the thread
    goes (content-addressed by channel version, harmless)."""
    args = {"t": thread_id, "runs": run_ids}
    await conn.execute(DELETE_WRITES, args)
    cur = await conn.execute(DELETE_CHECKPOINTS, args)
    return cur.rowcount
