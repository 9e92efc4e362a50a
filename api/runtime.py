"""The long-lived parts a process needs to run graphs: database, pool, checkpointer, graphs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from api.adapters import DEFAULT, GraphAdapter
from api.builtin_agent import BUILTIN_ASSISTANT
from api.database import Database, Pool, open_pool, prepare_schema, resolve_database
from api.memory import open_store
from api.saver import PooledSaver
from api.settings import Settings

logger = logging.getLogger(__name__)


def saver_concurrency(pool_max_size: int) -> int:
    """Connections the checkpointer may hold at once: the pool less a share for queue and events."""
    return max(1, pool_max_size - max(2, pool_max_size // 4))


@dataclass
class Runtime:
    """What the lifespan (or the CLI) opens once and hands to everything else."""

    settings: Settings
    database: Database
    pool: Pool
    saver: PooledSaver
    graphs: dict[str, Pregel[Any, Any, Any, Any]] = field(default_factory=dict)
    store: BaseStore | None = None
    """Long-term memory (``api.memory``): given to every graph, behind the ``/store`` routes."""
    adapters: dict[str, GraphAdapter] = field(default_factory=dict)
    """How the service treats each graph beyond LangGraph's semantics (``api.adapters``); a
    graph without one gets the default."""

    def adapter(self, assistant_id: str) -> GraphAdapter:
        return self.adapters.get(assistant_id, DEFAULT)


@asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Start or connect to PostgreSQL, migrate, set up the saver, build the built-in agent."""
    from api.builtin_agent.wiring import open_agent

    database = await resolve_database(settings.database_url, settings.data_dir)
    logger.info("database: %s", database.mode)
    async with (
        open_pool(
            database.url, max_size=settings.pool_max_size, min_size=settings.pool_min_size
        ) as pool,
        open_store(pool) as store,
    ):
        saver = PooledSaver(pool, concurrency=saver_concurrency(settings.pool_max_size))
        await prepare_schema(pool, saver, store)
        runtime = Runtime(settings=settings, database=database, pool=pool, saver=saver, store=store)
        graph, adapter = await open_agent(settings, saver, store)
        runtime.graphs[BUILTIN_ASSISTANT] = graph
        runtime.adapters[BUILTIN_ASSISTANT] = adapter
        yield runtime
