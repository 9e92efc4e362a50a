"""The long-term memory store as the ``langgraph.json`` ``"store"`` configures it
(:mod:`api.project.store_config`): LangGraph's ``AsyncPostgresStore`` on the service's pool, with
its semantic index and TTLs.

The index is LangGraph's own (``AsyncPostgresStore(index=...)``, vectors in pgvector) when the
database has the ``vector`` extension or this role may create it (the embedded PostgreSQL ships
it). Otherwise the same searches are answered by an exact scan (:mod:`api.durable.exact_scan`): one
warning at start-up says so and where its limit is. TTLs are LangGraph's ``TTLConfig``; the
store's sweeper runs while the runtime is open (:func:`start_store`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from langgraph.store.postgres.aio import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig

from api.durable.exact_scan import SCAN_RATE, ExactScanStore
from api.platform.database import Pool
from api.project.store_config import IndexSpec, StoreConfig
from api.store import vectors

logger = logging.getLogger(__name__)

VECTOR_MAX_DIMS = 2000
"""pgvector's HNSW index takes ``vector`` columns of at most this many dimensions..."""
HALFVEC_MAX_DIMS = 4000
"""... and ``halfvec`` (half precision) ones of at most this many; LangGraph's store always
builds the index, so more dimensions than this are scanned exactly
(:mod:`api.durable.exact_scan`)."""
SWEEPER_STOP_SECONDS = 5.0


@asynccontextmanager
async def open_store(
    pool: Pool, config: StoreConfig | None = None
) -> AsyncIterator[AsyncPostgresStore]:
    """The store on ``pool``; its tables are set up by ``prepare_schema`` (under the lock),
    after which :func:`start_store` starts its TTL sweeper. Closing stops the sweeper; the
    store's batching loop (LangGraph's ``AsyncBatchedBaseStore``) stops with the store itself,
    once it is dropped, or with the event loop."""
    config = config or StoreConfig()
    store = await _make_store(pool, config)
    try:
        yield store
    finally:
        await store.stop_ttl_sweeper(timeout=SWEEPER_STOP_SECONDS)


async def start_store(store: AsyncPostgresStore, pool: Pool) -> None:
    """Once its tables are set up: vectors the exact scan kept move into pgvector, now there;
    LangGraph's TTL sweeper starts (every ``sweep_interval_minutes``, 5 by default) when the
    config has a ``ttl``, as LangGraph's server starts it."""
    if store.index_config and not isinstance(store, ExactScanStore):
        async with pool.connection() as conn:
            dims = int(store.index_config["dims"])
            await check_dims(conn, dims)
            moved = await vectors.move_to_pgvector(conn, dims, halfvec=dims > VECTOR_MAX_DIMS)
        if moved:
            logger.info("store: %d vectors of the exact scan moved into pgvector", moved)
    if store.ttl_config:
        await store.start_ttl_sweeper()


async def _make_store(pool: Pool, config: StoreConfig) -> AsyncPostgresStore:
    if config.index is None:
        return AsyncPostgresStore(pool, ttl=config.ttl)
    why_not = await vector_support(pool)
    if why_not is None and config.index.dims > HALFVEC_MAX_DIMS:
        why_not = f"pgvector indexes at most {HALFVEC_MAX_DIMS} dimensions"
    if why_not is None:
        logger.info(
            "store: semantic index %s (%d dimensions) in pgvector",
            config.index.embed,
            config.index.dims,
        )
        return AsyncPostgresStore(pool, index=pgvector_index(config.index), ttl=config.ttl)
    per_second = SCAN_RATE // config.index.dims
    logger.warning(
        "store: %s, so semantic search (store.index, %s) is an exact scan in PostgreSQL: "
        "right answers, but each query reads every vector under its namespace, about %d "
        "items of %d dimensions per second; for more, install pgvector (CREATE EXTENSION "
        "vector) and restart",
        why_not,
        config.index.embed,
        per_second,
        config.index.dims,
    )
    return ExactScanStore(pool, index=config.index, ttl=config.ttl)


async def check_dims(conn: Any, dims: int) -> None:
    """Refuse to start on a pgvector table of other dimensions than the config's (its first
    put would fail): the config changed after items were embedded."""
    cur = await conn.execute(
        "SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute "
        "WHERE attrelid = to_regclass('store_vectors') AND attname = 'embedding'"
    )
    row = await cur.fetchone()
    found = re.fullmatch(r"(?:vector|halfvec)\((\d+)\)", row["t"]) if row else None
    if found and int(found.group(1)) != dims:
        raise StoreDimsChanged(
            f'langgraph.json "store.index.dims" is {dims}, but the store\'s vectors have '
            f"{found.group(1)} dimensions: set dims back, or drop the table store_vectors "
            "(its items are kept) and put the items again to embed them anew"
        )


class StoreDimsChanged(RuntimeError):
    """The configured index has other dimensions than the vectors already stored."""


def pgvector_index(index: IndexSpec) -> PostgresIndexConfig:
    """LangGraph's index config: its defaults (cosine distance, an HNSW index of ``vector``);
    half-precision vectors where a ``vector`` column is too wide for the index (OpenAI's
    text-embedding-3-large: 3072), as pgvector advises (scores then agree to about 1e-3)."""
    config = PostgresIndexConfig(dims=index.dims, embed=index.embeddings, fields=index.fields)
    if index.dims > VECTOR_MAX_DIMS:
        config["ann_index_config"] = {"kind": "hnsw", "vector_type": "halfvec"}
    return config


async def vector_support(pool: Pool) -> str | None:
    """None when pgvector can hold the index (installed, or created now), else why not."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') AS installed,"
            " EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') AS available"
        )
        row = await cur.fetchone()
        if row is None or row["installed"]:
            return None
        if not row["available"]:
            return "PostgreSQL has no pgvector (no 'vector' in pg_available_extensions)"
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege:
            return (
                "PostgreSQL has pgvector but this role may not create the extension (a "
                "superuser can: CREATE EXTENSION vector)"
            )
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
            pass  # another replica created it meanwhile
    return None
