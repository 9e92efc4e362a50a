"""The database's health (``api.platform.db_health``): faults told from a statement's own errors, an
outage found within seconds by a pool caller or a fault, and its end."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import errors
from psycopg_pool import PoolTimeout

from api.durable.hub import STREAM_POLL_SECONDS, Hub
from api.http.sse import run_events
from api.lifecycle import open_serving_runtime
from api.platform.database import open_pool
from api.platform.db_health import (
    PROBE_SECONDS,
    DatabaseHealth,
    DatabaseUnavailable,
    is_database_fault,
)
from api.platform.pool import SUSPECT_SECONDS
from api.platform.settings import Settings
from api.store import events
from tests.utils.pg_cluster import PgCluster, pg_cluster_fixture
from tests.utils.runs import claimed_run

__all__ = ["pg_cluster_fixture"]


@pytest.mark.parametrize(
    "err",
    [
        errors.AdminShutdown("terminating connection due to administrator command"),
        errors.CrashShutdown("terminating connection because of crash of another process"),
        errors.CannotConnectNow("the database system is starting up"),
        errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        PoolTimeout("couldn't get a connection after 30.00 sec"),
        DatabaseUnavailable("it does not answer"),
    ],
)
def test_these_are_the_database_going_away(err: Exception) -> None:
    assert is_database_fault(err)
    try:  # however a node or a library wraps it
        try:
            raise err
        except Exception as inner:
            raise RuntimeError("the tool failed") from inner
    except RuntimeError as wrapped:
        assert is_database_fault(wrapped)
    assert is_database_fault(ExceptionGroup("a step", [ValueError("x"), err]))


@pytest.mark.parametrize(
    "err",
    [
        errors.UniqueViolation("duplicate key"),
        errors.QueryCanceled("canceling statement due to statement timeout"),
        errors.SerializationFailure("could not serialize access"),
        errors.UndefinedTable("relation does not exist"),
        ValueError("a node's own error"),
        ConnectionError("a tool's own connection to somewhere else"),
    ],
)
def test_these_are_not(err: Exception) -> None:
    assert not is_database_fault(err)


async def test_an_outage_is_found_by_a_waiting_caller_and_its_end_by_the_watch(
    pg_cluster: PgCluster,
) -> None:
    pg = await asyncio.to_thread(pg_cluster.server)
    async with open_pool(pg.url, max_size=2) as pool:
        health = pool.health
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")
        assert not health.down and await health.probe()

        await asyncio.to_thread(pg.stop, "fast")
        # The pool's one connection is taken and no other can be opened: the next caller waits
        # SUSPECT_SECONDS, asks the server, and is told.
        async with pool.connection():
            asked = time.monotonic()
            with pytest.raises(DatabaseUnavailable, match="unreachable"):
                async with pool.connection():
                    pass
            waited = time.monotonic() - asked
        assert waited < SUSPECT_SECONDS + PROBE_SECONDS + 1, waited
        assert health.down
        asked = time.monotonic()
        with pytest.raises(DatabaseUnavailable):  # a known outage: no wait at all
            async with pool.connection():
                pass
        assert time.monotonic() - asked < 0.1

        await asyncio.to_thread(pg.start)
        assert await health.wait_up(timeout=10)
        assert not health.down
        # The connections that died with the server are checked, discarded and replaced.
        for _ in range(3):
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
        assert health.outages == 1


async def test_a_lost_connection_with_the_server_up_is_no_outage(pg_cluster: PgCluster) -> None:
    pg = await asyncio.to_thread(pg_cluster.server)
    health = DatabaseHealth(pg.url)
    try:
        health.fault(psycopg.OperationalError("server closed the connection unexpectedly"))
        assert await health.wait_up(timeout=5)
        assert not health.down and health.outages == 0
    finally:
        await health.close()


async def test_a_stream_outlasts_an_outage_on_its_connection(
    pg_cluster: PgCluster, tmp_path: Path, clean_env: None
) -> None:
    """A stream that reads the table while the database is down waits for it, open, and goes
    on with the events stored once it is back (``api.http.sse``)."""
    pg = await asyncio.to_thread(pg_cluster.server)
    settings = Settings(database_url=pg.url, data_dir=tmp_path / "data")
    async with open_serving_runtime(settings) as runtime:
        run = await claimed_run(runtime)
        hub = Hub(runtime.database.url)  # not listening: its streams read every few seconds
        stream = run_events(runtime.pool, hub, run.run_id, after=0, modes=["custom"])
        first = asyncio.ensure_future(anext(stream))
        try:
            await asyncio.sleep(0.5)
            await asyncio.to_thread(pg.stop, "fast")
            await asyncio.sleep(STREAM_POLL_SECONDS * 2)  # it read (and failed) meanwhile
            assert not first.done(), first
            assert runtime.pool.health.down
            await asyncio.to_thread(pg.start)
            assert await runtime.pool.health.wait_up(timeout=10)
            async with runtime.pool.connection() as conn:
                await events.append_batch(
                    conn, run.run_id, run.attempt, [(1, "custom", '{"after": "outage"}')]
                )
            frame = await asyncio.wait_for(first, 10)
            assert b'"after": "outage"' in frame or b'"after":"outage"' in frame, frame
        finally:
            first.cancel()
            await stream.aclose()
