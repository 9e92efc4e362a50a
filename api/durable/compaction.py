"""Keep only a thread's latest checkpoint: what ``THREADLINE_CHECKPOINT_RETENTION=latest`` does
after each run, and ``POST /threads/prune`` with ``strategy: keep_latest``.

The agent's ``messages`` is a ``DeltaChannel``: a checkpoint stores only the step's new messages,
and loading one replays its ancestors' writes back to the last snapshot. Deleting the ancestors
would silently empty the list, which is why ``AsyncPostgresSaver.aprune`` refuses such threads.
This does what LangGraph's ``BaseCheckpointSaver.prune`` documentation prescribes for them: it
resolves each delta channel's value at the kept checkpoint (the ordinary ancestor walk), stores it
there whole, as a blob of the plain value (which ``DeltaChannel.from_checkpoint`` restores
directly, as it does its own snapshots, whose type LangGraph does not export), then deletes the
other checkpoints, their writes and the blobs no longer referenced, all in one transaction
(``api.store.checkpoint_tables.history``).

Only threads whose checkpoints are all in the root namespace are compacted (the built-in agent
has no subgraphs); others are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import StateSnapshot

from api.durable.run_memory import delta_channels
from api.durable.saver import PooledSaver
from api.platform.database import Pool
from api.store import runs
from api.store.checkpoint_tables import history
from api.store.checkpoint_tables.rows import blob_rows


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
        nested, count = await history.count_checkpoints(conn, thread_id)
    if nested:
        return Compacted(kept=None, skipped="the thread has subgraph checkpoints")
    if count <= 1:
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
    snapshots = blob_rows(saver.serde, thread_id, "", values, {k: versions[k] for k in values})
    async with pool.connection() as conn, conn.transaction():
        # One snapshot of the tables: a checkpoint saved meanwhile is neither seen nor deleted.
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if check_idle and await runs.lock_thread(conn, thread_id):  # it has active runs
            raise ThreadBusy(thread_id)
        if await history.latest_checkpoint(conn, thread_id) != kept:
            return Compacted(kept=None, skipped="the thread moved on while it was read")
        deleted = await history.keep_only(conn, thread_id, kept, snapshots)
    return Compacted(kept=kept, deleted_checkpoints=deleted)


def checkpoint_id_of(config: RunnableConfig) -> str | None:
    return (config.get("configurable") or {}).get("checkpoint_id")
