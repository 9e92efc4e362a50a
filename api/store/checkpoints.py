"""LangGraph's checkpoint tables, where the checkpointer's API has no call for it: copying a
thread's whole history (every namespace, blobs and pending writes) to a new thread id."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

COPY_CHECKPOINTS = """
INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
                         checkpoint, metadata)
SELECT %(to)s::text, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
       CASE WHEN metadata ? 'thread_id'
            THEN jsonb_set(metadata, '{thread_id}', to_jsonb(%(to)s::text)) ELSE metadata END
  FROM checkpoints WHERE thread_id = %(from)s
"""

COPY_BLOBS = """
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT %(to)s, checkpoint_ns, channel, version, type, blob
  FROM checkpoint_blobs WHERE thread_id = %(from)s
"""

COPY_WRITES = """
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,
                               type, blob, task_path)
SELECT %(to)s, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path
  FROM checkpoint_writes WHERE thread_id = %(from)s
"""


async def copy_thread(conn: AsyncConnection[Any], source: str, target: str) -> int:
    """Copy ``source``'s checkpoints, blobs and writes to ``target`` (which has none yet);
    returns the number of checkpoints copied. Run it in the transaction that creates
    ``target``'s row."""
    params = {"from": source, "to": target}
    cur = await conn.execute(COPY_CHECKPOINTS, params)
    copied = cur.rowcount
    await conn.execute(COPY_BLOBS, params)
    await conn.execute(COPY_WRITES, params)
    return copied
