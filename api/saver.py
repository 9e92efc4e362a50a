"""The checkpointer: LangGraph's ``AsyncPostgresSaver`` on the process's pool, without its one
lock, and for a run the service executes, one transaction per step.

A step's checkpoint is written in one transaction, sent as one pipeline, together with the run's
events emitted before it (``api.store.event_writer``) and the task writes that came before it
(``api.task_writes``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import DictRow, dict_row

from api.database import Pool, run_to_completion
from api.task_writes import PendingWrites, WriteBuffer

EVENTS_BARRIER_KEY = "__threadline_events_barrier"
"""In a run's ``config["configurable"]``: a function returning an async context manager that
yields ``store(conn)``. :class:`PooledSaver` enters it for each checkpoint and calls ``store`` in
the checkpoint's transaction, before the checkpoint: the run's events emitted before it are then
stored with it, in one commit (``api.store.event_writer``).

The same config tells the saver to hold a task's writes for that transaction too
(``api.task_writes``), or to store them alone when no checkpoint comes soon. A step whose writes
were saved but not its checkpoint runs again as cached on a takeover, and LangGraph emits its
updates again; the takeover dedupe stores those an earlier attempt did not (``api.takeover``)."""

_transaction: ContextVar[AsyncConnection[Any] | None] = ContextVar(
    "threadline_checkpoint_transaction", default=None
)
"""The connection of the transaction :meth:`PooledSaver.aput` writes a checkpoint in."""


def checkpoint_transaction() -> AsyncConnection[Any] | None:
    """Inside :meth:`PooledSaver.aput`: the connection whose transaction holds the checkpoint."""
    return _transaction.get()


class PooledSaver(AsyncPostgresSaver):
    """``AsyncPostgresSaver`` whose lock admits as many calls at once as it may use connections,
    and that writes a run's events and task writes in the transaction of its next checkpoint.

    The stock saver serializes every call behind one ``asyncio.Lock`` (needed for a single
    connection). On a pool each call takes its own connection, so a semaphore sized to the share of
    the pool set aside for checkpoints lets concurrent runs checkpoint in parallel.

    Only a run whose config carries ``EVENTS_BARRIER_KEY`` (one the service executes) has its
    events and task writes grouped; any other use is the stock saver's.
    """

    def __init__(self, pool: Pool, *, concurrency: int) -> None:
        super().__init__(pool)
        self.lock = asyncio.Semaphore(concurrency)  # type: ignore[assignment]
        self.writes = WriteBuffer(self._connection)
        """Task writes waiting for their thread's next checkpoint (``api.task_writes``)."""

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with self.lock, cast(Pool, self.conn).connection() as conn:
            yield conn

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        if EVENTS_BARRIER_KEY not in configurable:
            return await super().aput_writes(config, writes, task_id, task_path)
        # The stock saver's rows and statements, built here rather than in a thread: a task's
        # writes are the update its event carries, which the event log serializes here too.
        query = (
            self.UPSERT_CHECKPOINT_WRITES_SQL
            if all(w[0] in WRITES_IDX_MAP for w in writes)
            else self.INSERT_CHECKPOINT_WRITES_SQL
        )
        thread_id = configurable["thread_id"]
        rows = self._dump_writes(
            thread_id,
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        await self.writes.add(str(thread_id), [(query, params) for params in rows])

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        events = (config.get("configurable") or {}).get(EVENTS_BARRIER_KEY)
        if events is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        # Taken before waiting for the events' lock and a connection: under load that wait
        # outlasts the delay, and the writes would go in a transaction of their own (waiting
        # for the same lock and pool) rather than in this one.
        writes = self.writes.take(str(config["configurable"]["thread_id"]))
        started = False
        try:
            async with events() as store_events, self._connection() as conn:
                started = True
                # Once the transaction started it runs to its end, COMMIT or ROLLBACK, even when
                # the run is cancelled meanwhile (the cancellation is raised after it): a
                # pipeline left half-way would hand the pool a connection still in a transaction.
                return await run_to_completion(
                    self._aput_in_transaction(
                        conn, store_events, writes, config, checkpoint, metadata, new_versions
                    )
                )
        except BaseException:
            if writes is not None and not started:  # no transaction to carry them: on their own
                self.writes.store_alone(writes)
            raise

    async def _aput_in_transaction(
        self,
        conn: AsyncConnection[Any],
        store_events: Callable[[AsyncConnection[Any]], Awaitable[None]],
        writes: PendingWrites | None,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The events, the task writes, the blobs and the checkpoint in one transaction sent as
        one pipeline: one round trip, whose COMMIT fails if the event log's fence refused the
        events (then none of it is stored)."""
        try:
            async with conn.pipeline(), conn.transaction():
                await store_events(conn)
                if writes is not None:
                    await writes.write(conn)
                token = _transaction.set(conn)
                try:
                    saved = await super().aput(config, checkpoint, metadata, new_versions)
                finally:
                    _transaction.reset(token)
        except BaseException as err:  # rolled back: the writes' callers get the error too
            if writes is not None:
                writes.failed(err)
            raise
        if writes is not None:  # committed
            writes.stored()
        return saved

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[AsyncCursor[DictRow]]:
        conn = _transaction.get()
        if conn is None:
            async with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        # In :meth:`aput`'s transaction (its lock is held already).
        async with conn.cursor(binary=True, row_factory=dict_row) as cur:
            yield cur

    def get_next_version(self, current: str | None, channel: None) -> str:
        return next_channel_version(current)


VERSION_DIGITS = 12
"""Width of the counter in a channel version. The stock saver's ``{n:032}.{random():016}`` is 51
characters, and a checkpoint names one version per channel plus one per channel each node has
seen: short versions take about 0.9 KB off every agent step (bench/: checkpoint storage)."""


def next_channel_version(current: str | int | None) -> str:
    """The version after ``current``: ``{n:012}.{8 random hex digits}``.

    LangGraph compares versions as strings, so the counter is zero-padded to a fixed width. The
    random part keeps two forks of one checkpoint from writing different values under the same
    blob key (``checkpoint_blobs`` keeps the first, ``ON CONFLICT DO NOTHING``). Threads written
    by the stock saver carry 32-digit counters; any short version compares greater than those
    (more leading zeros, counters below 10^20), so such a thread moves on to short versions and
    its versions keep increasing.
    """
    if current is None:
        count = 0
    elif isinstance(current, int):
        count = current
    else:
        count = int(current.split(".", 1)[0])
    return f"{count + 1:0{VERSION_DIGITS}}.{random.getrandbits(32):08x}"
