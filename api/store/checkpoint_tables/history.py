"""A thread's checkpoint history as a whole: copied to a new thread, a rolled-back run's part
deleted, whole threads deleted, compacted to its latest checkpoint (``api.durable.compaction``).
The checkpointer's API has no call for most of these; each is a few statements on all of the
thread's rows, in the caller's transaction."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from api.store.checkpoint_tables.rows import BlobRow

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
    """Copy ``source``'s checkpoints (every namespace), blobs and pending writes to ``target``
    (which has none yet); returns the number of checkpoints copied. Run it in the transaction
    that creates ``target``'s row."""
    params = {"from": source, "to": target}
    cur = await conn.execute(COPY_CHECKPOINTS, params)
    copied = cur.rowcount
    await conn.execute(COPY_BLOBS, params)
    await conn.execute(COPY_WRITES, params)
    return copied


DELETE_WRITES_OF_RUNS = """
DELETE FROM checkpoint_writes w USING checkpoints c
WHERE c.thread_id = %(t)s AND c.metadata ->> 'run_id' = ANY(%(runs)s)
  AND w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns
  AND w.checkpoint_id = c.checkpoint_id
"""
DELETE_CHECKPOINTS_OF_RUNS = """
DELETE FROM checkpoints WHERE thread_id = %(t)s AND metadata ->> 'run_id' = ANY(%(runs)s)
"""


async def delete_of_runs(conn: AsyncConnection[Any], thread_id: str, run_ids: list[str]) -> int:
    """Delete the thread's checkpoints (every namespace) saved by these runs (their run id is in
    the metadata), and their writes; the number of checkpoints deleted. Blobs no checkpoint uses
    any more stay until the thread goes (content-addressed by channel version, harmless)."""
    args = {"t": thread_id, "runs": run_ids}
    await conn.execute(DELETE_WRITES_OF_RUNS, args)
    cur = await conn.execute(DELETE_CHECKPOINTS_OF_RUNS, args)
    return cur.rowcount


async def delete_threads(conn: AsyncConnection[Any], thread_ids: list[str]) -> None:
    """Delete everything of these threads (what ``AsyncPostgresSaver.adelete_thread`` deletes)."""
    for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
        await conn.execute(f"DELETE FROM {table} WHERE thread_id = ANY(%s)", (thread_ids,))


# Compaction: only the thread's latest checkpoint is kept, in the root namespace.

COUNT_CHECKPOINTS = """
SELECT count(*) FILTER (WHERE checkpoint_ns <> '') AS nested, count(*) AS n
FROM checkpoints WHERE thread_id = %s
"""

LATEST_CHECKPOINT = """
SELECT max(checkpoint_id) AS latest FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''
"""

SNAPSHOT_BLOB = """
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (thread_id, checkpoint_ns, channel, version)
DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob
"""

DELETE_OTHER_WRITES = """
DELETE FROM checkpoint_writes
WHERE thread_id = %(t)s AND checkpoint_ns = '' AND checkpoint_id <> %(kept)s
"""

DELETE_OTHER_CHECKPOINTS = """
DELETE FROM checkpoints
WHERE thread_id = %(t)s AND checkpoint_ns = '' AND checkpoint_id <> %(kept)s
"""

# The kept checkpoint starts the chain now; its delta channels were just snapshotted.
DETACH = """
UPDATE checkpoints
SET parent_checkpoint_id = NULL, metadata = metadata - 'counters_since_delta_snapshot'
WHERE thread_id = %(t)s AND checkpoint_ns = '' AND checkpoint_id = %(kept)s
"""

DELETE_UNREFERENCED_BLOBS = """
DELETE FROM checkpoint_blobs b
WHERE b.thread_id = %(t)s AND b.checkpoint_ns = ''
AND NOT EXISTS (
    SELECT 1 FROM checkpoints c
    CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = ''
    AND v.key = b.channel AND v.value = b.version
)
"""


async def count_checkpoints(conn: AsyncConnection[Any], thread_id: str) -> tuple[int, int]:
    """The thread's checkpoints in subgraph namespaces, and in all."""
    cur = await conn.execute(COUNT_CHECKPOINTS, (thread_id,))
    row = await cur.fetchone()
    return (0, 0) if row is None else (row["nested"], row["n"])


async def latest_checkpoint(conn: AsyncConnection[Any], thread_id: str) -> str | None:
    """The id of the thread's latest checkpoint in the root namespace."""
    cur = await conn.execute(LATEST_CHECKPOINT, (thread_id,))
    row = await cur.fetchone()
    return None if row is None else row["latest"]


async def keep_only(
    conn: AsyncConnection[Any], thread_id: str, kept: str, snapshots: list[BlobRow]
) -> int:
    """Store ``snapshots`` (the kept checkpoint's delta channels, whole, at its versions), then
    delete every other root checkpoint of the thread, their writes and the blobs no checkpoint
    uses any more; the number of checkpoints deleted. Run it in a transaction that has checked
    ``kept`` is still the latest."""
    params = {"t": thread_id, "kept": kept}
    for row in snapshots:
        await conn.execute(SNAPSHOT_BLOB, row)
    await conn.execute(DELETE_OTHER_WRITES, params)
    cur = await conn.execute(DELETE_OTHER_CHECKPOINTS, params)
    deleted = cur.rowcount
    await conn.execute(DETACH, params)
    await conn.execute(DELETE_UNREFERENCED_BLOBS, params)
    return deleted
