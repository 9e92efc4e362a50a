"""The long-lived parts a process needs to run graphs: database, pool, checkpointer, graphs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from api.durable.memory_index import open_store, start_store
from api.durable.saver import PooledSaver
from api.platform.database import Database, Pool, open_pool, prepare_schema, resolve_database
from api.platform.settings import Settings
from api.project.adapters import DEFAULT, GraphAdapter
from api.project.graph_factory import Factory, FactoryRuntime
from api.project.graphs import bind
from api.project.store_config import load_store_config

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
    """Long-term memory (``api.runs.memory``): given to every graph, behind the ``/store``
    routes."""
    adapters: dict[str, GraphAdapter] = field(default_factory=dict)
    """How the service treats each graph beyond LangGraph's semantics (``api.project.adapters``); a
    graph without one gets the default."""

    factories: dict[str, Factory] = field(default_factory=dict)
    """The graphs a factory makes (``api.project.graph_factory``): made again for each run."""
    default_graph: str | None = None
    """The graph a thread with no run and no graph in its metadata is read with (the built-in
    agent, which ``api.lifecycle`` serves)."""

    def serve(
        self, graph_id: str, graph: Pregel[Any, Any, Any, Any], adapter: GraphAdapter
    ) -> None:
        """Serve ``graph`` under ``graph_id``, treated as ``adapter`` says (the seam a graph
        beyond LangGraph's semantics, such as the built-in agent, is registered through)."""
        self.graphs[graph_id] = graph
        self.adapters[graph_id] = adapter

    def adapter(self, graph_id: str) -> GraphAdapter:
        return self.adapters.get(graph_id, DEFAULT)

    @asynccontextmanager
    async def run_graph(
        self, graph_id: str, config: Any, context: Any
    ) -> AsyncIterator[Pregel[Any, Any, Any, Any]]:
        """The graph a run executes: the served one, or the one its factory makes for the run's
        config and context (held open, if a context manager, while the run runs)."""
        factory = self.factories.get(graph_id)
        if factory is None:
            yield self.graphs[graph_id]
            return
        running = FactoryRuntime(
            access_context="threads.create_run",
            store=self.store,
            user=config["configurable"].get("langgraph_auth_user"),
            context=context,
        )
        async with factory.made(dict(config), running) as made:
            yield bind(made, self.saver, self.store)


@asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Start or connect to PostgreSQL, migrate, set up the saver and the store; no graph is
    served yet (``api.lifecycle`` adds them)."""
    database = await resolve_database(settings.database_url, settings.data_dir)
    store_config = await asyncio.to_thread(load_store_config, settings.config)
    logger.info("database: %s", database.mode)
    async with (
        open_pool(
            database.url, max_size=settings.pool_max_size, min_size=settings.pool_min_size
        ) as pool,
        open_store(pool, store_config) as store,
    ):
        saver = PooledSaver(
            pool,
            concurrency=saver_concurrency(settings.pool_max_size),
            delta_cache_items=settings.delta_cache_items,
        )
        await prepare_schema(pool, saver, store)
        await start_store(store, pool)
        runtime = Runtime(settings=settings, database=database, pool=pool, saver=saver, store=store)
        yield runtime
