"""LangGraph's ``AsyncPostgresSaver`` serving as many calls at once as it may use connections.

The stock saver takes one lock for every call: it is made for one connection. On a pool each
call can have a connection of its own, so :class:`SaverPool` keeps ``concurrency`` stock savers
on the pool and lends each call an idle one, which serves that call alone, as its lock expects;
its own lock and connection (the stock saver's it inherits) are never used. Everything goes
through the stock saver's public methods, and its tables are checked at start-up
(``api.store.checkpoint_tables.check_version``). Channel versions are short
(:func:`next_channel_version`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncConnection

from api.durable.delta_cache import DeltaCache
from api.durable.run_memory import delta_channels
from api.platform.database import Pool
from api.platform.metrics import DELTA_CACHE_READS
from api.store.checkpoint_tables import check_version

DEFAULT_DELTA_CACHE_ITEMS = 200_000


class SaverPool(AsyncPostgresSaver):
    """``AsyncPostgresSaver`` whose calls each borrow one of ``concurrency`` stock savers on
    ``pool`` (:meth:`stock`). ``slots`` bounds the connections checkpoints hold at once, a
    subclass's own statements included (:meth:`_connection`)."""

    def __init__(
        self,
        pool: Pool,
        *,
        concurrency: int,
        serde: SerializerProtocol | None = None,
        delta_cache_items: int = DEFAULT_DELTA_CACHE_ITEMS,
    ) -> None:
        super().__init__(pool, serde=serde)
        self.pool = pool
        self.delta_cache = DeltaCache(delta_cache_items)
        """Delta channel values at threads' latest checkpoints (``api.durable.delta_cache``)."""
        self.concurrency = concurrency
        self.slots = asyncio.Semaphore(concurrency)
        """Calls that may hold a connection at once (a share of the pool)."""
        self.idle = self._stock_savers()
        """The stock savers no call has borrowed."""

    def _stock_savers(self) -> list[AsyncPostgresSaver]:
        return [AsyncPostgresSaver(self.pool, serde=self.serde) for _ in range(self.concurrency)]

    @asynccontextmanager
    async def stock(self) -> AsyncIterator[AsyncPostgresSaver]:
        """A stock saver for one call, once a slot is free."""
        async with self.slots:
            saver = self.idle.pop()
            try:
                yield saver
            finally:
                self.idle.append(saver)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection for a statement of threadline's own, once a slot is free."""
        async with self.slots, self.pool.connection() as conn:
            yield conn

    async def setup(self) -> None:
        """The stock ``setup()`` (the tables created or migrated), once the tables are known to
        be at a migration version threadline writes them for (a clear refusal otherwise)."""
        async with self._connection() as conn:
            await check_version(conn, self.MIGRATIONS)
        async with self.stock() as saver:
            await saver.setup()

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> SaverPool:
        """A clone reading with LangGraph's msgpack allowlist (under
        ``LANGGRAPH_STRICT_MSGPACK``): its stock savers use the clone's ``serde``; the slots,
        and what a subclass keeps of runs, stay shared."""
        clone = super().with_allowlist(extra_allowlist)
        if clone is self or not isinstance(clone, SaverPool):
            return self
        clone.idle = clone._stock_savers()
        return clone

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        async with self.stock() as saver:
            return await saver.aget_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async with self.stock() as saver:
            async for item in saver.alist(config, filter=filter, before=before, limit=limit):
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        async with self.stock() as saver:
            return await saver.aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        async with self.stock() as saver:
            await saver.aput_writes(config, writes, task_id, task_path)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if channels and not get_checkpoint_id(config):  # the latest, as this saver reads it
            target = await self.aget_tuple(config)
            if target is None:
                return {channel: {"writes": []} for channel in channels}
            config = target.config
        configurable = config.get("configurable") or {}
        if not configurable.get("checkpoint_ns") and (checkpoint_id := get_checkpoint_id(config)):
            thread_id = str(configurable["thread_id"])
            kept = self.delta_cache.history(thread_id, checkpoint_id, channels)
            DELTA_CACHE_READS.labels(result="miss" if kept is None else "hit").inc()
            if kept is not None:
                return kept
        async with self.stock() as saver:
            return await saver.aget_delta_channel_history(config=config, channels=channels)

    def remember_state(self, graph: Any, state: Any) -> None:
        """Keep the delta channel values of ``state`` at its root checkpoint, for the next read
        of it (``api.durable.delta_cache``). ``state`` must be the checkpoint's own values, with
        no pending write applied: what a graph that reached its end had when it saved it, not
        what ``aget_state`` answers for a paused thread."""
        configurable = (getattr(state, "config", None) or {}).get("configurable") or {}
        checkpoint_id = configurable.get("checkpoint_id")
        if not checkpoint_id or configurable.get("checkpoint_ns"):
            return
        values = state.values if isinstance(state.values, dict) else {}
        kept = {name: values[name] for name in delta_channels(graph) if name in values}
        self.delta_cache.remember(str(configurable["thread_id"]), checkpoint_id, kept)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delta_cache.forget(thread_id)
        async with self.stock() as saver:
            await saver.adelete_thread(thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in thread_ids:
            self.delta_cache.forget(str(thread_id))
        async with self.stock() as saver:
            await saver.aprune(thread_ids, strategy=strategy)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Short versions (:func:`next_channel_version`): ``BaseCheckpointSaver`` documents
        this method as the one to override for versions of one's own."""
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
