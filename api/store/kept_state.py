"""A thread's state answered from its stored values, when they are its latest checkpoint's.

A run whose graph reached its end writes the thread's values (``threads.state_values``) from
its last checkpoint, and names that checkpoint (``state_checkpoint_id``) when the values were
stored exactly as a state answer writes them (``api.store.rows.stored_values``). While that is
still the thread's latest root checkpoint, with no write pending on it, the thread's state is
those values, no ``next`` and no task: what ``graph.aget_state`` would answer after loading and
deserializing the checkpoint (on a long thread, its whole message list, and for a
``DeltaChannel`` its replay), which this reads as the stored JSON text instead. Any later
checkpoint (a run, a state update, a fork, a compaction that rewrote it) names another id, and
the state is read from the checkpoint again.

One statement, so the values, the id and the latest checkpoint are read in one snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

_KEPT = """
SELECT t.state_values::text AS values_text, c.checkpoint_id, c.parent_checkpoint_id,
       c.metadata, c.checkpoint->>'ts' AS created_at
  FROM threads t
  JOIN LATERAL (
      SELECT checkpoint_id, parent_checkpoint_id, metadata, checkpoint FROM checkpoints
       WHERE thread_id = t.thread_id AND checkpoint_ns = ''
       ORDER BY checkpoint_id DESC LIMIT 1) c ON true
 WHERE t.thread_id = %(thread)s
   AND t.state_checkpoint_id = c.checkpoint_id
   AND t.state_values IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM checkpoint_writes w
                    WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = ''
                      AND w.checkpoint_id = c.checkpoint_id)
"""


@dataclass(frozen=True)
class KeptState:
    """The thread's latest checkpoint, whose values are the stored JSON ``values_text``."""

    values_text: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    metadata: dict[str, Any]
    created_at: str | None


async def kept_state(conn: AsyncConnection[Any], thread_id: str) -> KeptState | None:
    """The thread's state from its stored values, or None when they are not known to be its
    latest checkpoint's (then read the checkpoint)."""
    cur = await conn.execute(_KEPT, {"thread": thread_id})
    row = await cur.fetchone()
    if row is None:
        return None
    return KeptState(
        values_text=row["values_text"],
        checkpoint_id=row["checkpoint_id"],
        parent_checkpoint_id=row["parent_checkpoint_id"],
        metadata=row["metadata"] or {},
        created_at=row["created_at"],
    )
