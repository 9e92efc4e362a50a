"""Keep only a thread's latest checkpoint: what ``THREADLINE_CHECKPOINT_RETENTION=latest`` does
after each run, and ``POST /threads/prune`` with ``strategy: keep_latest``.

The agent's ``messages`` is a ``DeltaChannel``: a checkpoint stores only the step's new messages,
and loading one replays its ancestors' writes back to the last snapshot. Deleting the ancestors
would silently empty the list, which is why ``AsyncPostgresSaver.aprune`` refuses such threads.
This does what LangGraph's ``BaseCheckpointSaver.prune`` documentation prescribes for them: it
resolves each delta channel's value at the kept checkpoint (the ordinary ancestor walk), stores it
there as a ``_DeltaSnapshot`` blob, then deletes the other checkpoints, their writes and the
blobs no longer referenced, all in one transaction.

Only threads whose checkpoints are all in the root namespace are compacted (the built-in agent
has no subgraphs); others are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot

from api.durable.saver import PooledSaver, delta_channels
from api.platform.database import Pool
from api.store import runs

SNAPSHOT_BLOB_SQL = """
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
VALUES (%s, '', %s, %s, %s, %s)
ON CONFLICT (thread_id, checkpoint_ns, channel, version)
DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob
"""

DELETE_WRITES_SQL = """
DELETE FROM checkpoint_writes
WHERE thread_id = %(t)s AND checkpoint_ns = '' AND checkpoint_id <> %(kept)s
"""

DELETE_CHECKPOINTS_SQL = """
DELETE FROM checkpoints
WHERE thread_id = %(t)s AND checkpoint_ns = '' AND checkpoint_id <> %(kept)s
"""

# The kept checkpoint starts the chain now; its delta channels were just snapshotted.
DETACH_SQL = """
UPDATE checkpoints
SET parent_checkpoint_id = NULL, metadata = metadata - 'counters_since_delta_snapshot'
WHERE thread_id = %(t)s AND checkpoint_ns = '' AND checkpoint_id = %(kept)s
"""

DELETE_UNREFERENCED_BLOBS_SQL = """
DELETE FROM checkpoint_blobs b
WHERE b.thread_id = %(t)s AND b.checkpoint_ns = ''
AND NOT EXISTS (
    SELECT 1 FROM checkpoints c
    CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = ''
    AND v.key = b.channel AND v.value = b.version
)
"""


@dataclass(frozen=True)
class Compacted:
    """What one compaction did."""

    kept: str | None
    """The checkpoint kept; ``None``: the thread was left as it is (see ``skipped``)."""
    deleted_checkpoints: int = 0
    skipped: str | None = None


class ThreadBusy(Exception):
    """The thread has a pending or running run: it is not compacted under it."""


async def compact_thread(
    pool: Pool,
    saver: PooledSaver,
    graph: Pregel[Any, Any, Any, Any],
    thread_id: str,
    *,
    check_idle: bool = False,
    state: StateSnapshot | None = None,
) -> Compacted:
    """Keep only the latest checkpoint of ``thread_id``, with its delta channels snapshotted.

    No run may write to the thread meanwhile. The worker calls this while the run that just
    ended still holds the thread. With ``check_idle`` (``POST /threads/prune``) the transaction
    locks the thread's row, which creating a run also locks, and raises :class:`ThreadBusy` if a
    run is pending or running. Either way, if the thread's latest checkpoint is no longer the one
    whose state was read, nothing is deleted.

    ``state``: the thread's state as the caller just read it (the worker, at the end of a run),
    used instead of reading it again when it is of the latest checkpoint.
    """
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    latest = await saver.aget_tuple(config)
    if latest is None:
        return Compacted(kept=None, skipped="the thread has no checkpoints")
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE checkpoint_ns <> '') AS nested, count(*) AS n"
            " FROM checkpoints WHERE thread_id = %s",
            (thread_id,),
        )
        counts = await cur.fetchone()
    assert counts is not None
    if counts["nested"]:
        return Compacted(kept=None, skipped="the thread has subgraph checkpoints")
    if counts["n"] <= 1:
        return Compacted(kept=latest.checkpoint["id"], deleted_checkpoints=0)
    versions = latest.checkpoint["channel_versions"]
    delta = sorted(name for name in delta_channels(graph) if name in versions)
    values: dict[str, Any] = {}
    if delta:
        if state is None or checkpoint_id_of(state.config) != latest.checkpoint["id"]:
            state = await graph.aget_state(latest.config)
        missing = [name for name in delta if name not in state.values]
        if missing:
            return Compacted(kept=None, skipped=f"delta channels outside the state: {missing}")
        values = {name: state.values[name] for name in delta}
    kept = latest.checkpoint["id"]
    params = {"t": thread_id, "kept": kept}
    async with pool.connection() as conn, conn.transaction():
        # One snapshot of the tables: a checkpoint saved meanwhile is neither seen nor deleted.
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if check_idle and await runs.lock_thread(conn, thread_id):  # it has active runs
            raise ThreadBusy(thread_id)
        cur = await conn.execute(
            "SELECT max(checkpoint_id) AS latest FROM checkpoints"
            " WHERE thread_id = %s AND checkpoint_ns = ''",
            (thread_id,),
        )
        row = await cur.fetchone()
        if row is None or row["latest"] != kept:
            return Compacted(kept=None, skipped="the thread moved on while it was read")
        for name, value in values.items():
            kind, blob = saver.serde.dumps_typed(_DeltaSnapshot(value))
            await conn.execute(
                SNAPSHOT_BLOB_SQL, (thread_id, name, str(versions[name]), kind, blob)
            )
        await conn.execute(DELETE_WRITES_SQL, params)
        cur = await conn.execute(DELETE_CHECKPOINTS_SQL, params)
        deleted = cur.rowcount
        await conn.execute(DETACH_SQL, params)
        await conn.execute(DELETE_UNREFERENCED_BLOBS_SQL, params)
    return Compacted(kept=kept, deleted_checkpoints=deleted)


def checkpoint_id_of(config: RunnableConfig) -> str | None:
    return (config.get("configurable") or {}).get("checkpoint_id")
