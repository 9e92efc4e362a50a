"""Threads past their time-to-live (``api.runs.thread_ttl``): taken under their row locks, deleted
or marked pruned in the taker's transaction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import AsyncConnection

from api.store.checkpoint_tables import history
from api.store.rows import iso

ACTIVE = "status IN ('pending', 'running')"

EXPIRED = f"""
SELECT t.thread_id, t.ttl_strategy FROM threads t
WHERE t.ttl_minutes IS NOT NULL
  AND t.updated_at + make_interval(secs => t.ttl_minutes * 60) <= now()
  AND (t.ttl_strategy = 'delete' OR t.ttl_pruned_at IS NULL OR t.ttl_pruned_at < t.updated_at)
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = t.thread_id AND r.{ACTIVE})
ORDER BY t.updated_at
LIMIT %s
FOR UPDATE OF t SKIP LOCKED
"""
BUSY = f"SELECT DISTINCT thread_id FROM runs WHERE thread_id = ANY(%s) AND {ACTIVE}"


async def take_expired(conn: AsyncConnection[Any], limit: int) -> tuple[int, list[dict[str, Any]]]:
    """Lock up to ``limit`` expired threads no other transaction holds (inside a transaction):
    how many were locked, and those without an active run (``thread_id``, ``ttl_strategy``).

    A run queued on one just before (its creator held the row's lock until it committed) is
    seen by the second statement, which reads after the lock was taken."""
    cur = await conn.execute(EXPIRED, (limit,))
    rows = list(await cur.fetchall())
    if not rows:
        return 0, []
    cur = await conn.execute(BUSY, ([r["thread_id"] for r in rows],))
    busy = {r["thread_id"] for r in await cur.fetchall()}
    return len(rows), [r for r in rows if r["thread_id"] not in busy]


async def delete(conn: AsyncConnection[Any], thread_ids: list[str]) -> None:
    """Delete the threads with their checkpoints (what ``AsyncPostgresSaver.adelete_thread``
    deletes); their runs, events and schedules go with their rows."""
    if not thread_ids:
        return
    await history.delete_threads(conn, thread_ids)
    await conn.execute("DELETE FROM threads WHERE thread_id = ANY(%s)", (thread_ids,))


async def mark_pruned(conn: AsyncConnection[Any], thread_ids: list[str]) -> None:
    """Not expired again until updated (``keep_latest``)."""
    if thread_ids:
        await conn.execute(
            "UPDATE threads SET ttl_pruned_at = now() WHERE thread_id = ANY(%s)", (thread_ids,)
        )


def info(row: dict[str, Any]) -> dict[str, Any] | None:
    """A thread's ``ttl`` as LangGraph's ``GET /threads/{id}?include=ttl`` shows it (None: it
    has none): its strategy, minutes, and when it expires unless it is updated first."""
    if row.get("ttl_minutes") is None:
        return None
    expires = row["updated_at"] + timedelta(minutes=row["ttl_minutes"])
    return {
        "strategy": row["ttl_strategy"],
        "ttl_minutes": row["ttl_minutes"],
        "expires_at": iso(expires),
    }
