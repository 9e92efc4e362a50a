"""``tests/utils/pg_cluster.py`` does what the database-fault tests rely on: committed rows survive
a restart, ``kill -9`` and an immediate stop; a frozen server answers nothing; a standby follows
its primary (synchronously when asked) and, promoted, takes the writes of a multi-host URL; a
cluster whose process died is cleaned up by the next one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tests.utils.pg_cluster import (
    PgCluster,
    PgServer,
    multi_host_url,
    pg_cluster_fixture,  # noqa: F401  (the pg_cluster fixture)
    reap_leftovers,
)

ROOT = Path(__file__).resolve().parent.parent


def rows(server: PgServer) -> list[int]:
    return [r[0] for r in server.execute("SELECT x FROM t ORDER BY x")]


def test_committed_rows_survive_a_restart_a_kill9_and_an_immediate_stop(
    pg_cluster: PgCluster,
) -> None:
    pg = pg_cluster.server()
    pg.execute("CREATE TABLE t (x int)")
    pg.execute("INSERT INTO t VALUES (1)")
    first = pg.pid

    pg.restart()  # fast
    assert pg.pid != first
    assert rows(pg) == [1]

    pg.execute("INSERT INTO t VALUES (2)")
    pg.kill9()
    assert not pg.is_ready()
    assert (pg.data_dir / "postmaster.pid").exists()  # left behind: the next start recovers
    pg.start()
    assert rows(pg) == [1, 2]

    pg.execute("INSERT INTO t VALUES (3)")
    pg.stop("immediate")
    pg.stop()  # stopping a stopped server does nothing
    pg.start()
    assert rows(pg) == [1, 2, 3]


async def answers(url: str) -> bool:
    try:
        async with await psycopg.AsyncConnection.connect(url, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


async def test_an_outage_keeps_the_server_down_for_its_seconds(pg_cluster: PgCluster) -> None:
    """Mid-run faults from an async test: the blocking calls go through ``asyncio.to_thread``."""
    pg = await asyncio.to_thread(pg_cluster.server)
    outage = asyncio.create_task(asyncio.to_thread(pg.outage, 1.0, mode="kill9"))
    deadline = time.monotonic() + 10
    while await answers(pg.url):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    down = time.monotonic()
    await outage
    assert time.monotonic() - down >= 0.9
    assert await answers(pg.url)


def test_kill9_waits_out_a_busy_backend_so_the_next_start_works(pg_cluster: PgCluster) -> None:
    """A backend busy computing outlives its postmaster (it notices the death only when it next
    waits) and holds the old shared memory, which a new postmaster refuses to start beside."""
    pg = pg_cluster.server()
    errors: list[BaseException] = []

    def busy() -> None:
        try:
            with psycopg.connect(pg.url) as conn:
                conn.execute("SELECT count(*) FROM generate_series(1, 1000000000)")
        except psycopg.OperationalError as exc:
            errors.append(exc)

    client = threading.Thread(target=busy)
    client.start()
    try:
        deadline = time.monotonic() + 10
        while not pg.execute("SELECT 1 FROM pg_stat_activity WHERE query LIKE '%generate_%'"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        started = time.monotonic()
        pg.kill9(timeout=1.0)
        # The backend may notice its postmaster's death at once or only after the timeout,
        # when kill9 kills it: either way the wait is bounded and the next start works.
        assert time.monotonic() - started < 5
    finally:
        client.join(10)
    assert len(errors) == 1
    pg.start()
    assert pg.execute("SELECT 1") == [(1,)]


def test_a_frozen_server_answers_nothing_until_thawed(pg_cluster: PgCluster) -> None:
    pg = pg_cluster.server()
    with psycopg.connect(pg.url, autocommit=True) as conn:
        pg.freeze()
        started = time.monotonic()
        with pytest.raises(psycopg.errors.ConnectionTimeout):
            psycopg.connect(pg.url, connect_timeout=2).close()
        assert time.monotonic() - started < 5
        pg.thaw()
        assert conn.execute("SELECT 1").fetchone() == (1,)  # an open connection lives on


def test_a_synchronous_standby_holds_commits_until_it_has_them(pg_cluster: PgCluster) -> None:
    primary, standby = pg_cluster.primary_with_standby(synchronous=True)
    primary.execute("CREATE TABLE t (x int)")
    committed = threading.Event()

    def insert() -> None:
        primary.execute("INSERT INTO t VALUES (1)")
        committed.set()

    standby.freeze()
    writer = threading.Thread(target=insert)
    writer.start()
    try:
        assert not committed.wait(1.0)
    finally:
        standby.thaw()
        writer.join(10)
    assert committed.is_set()
    primary.wait_replayed(standby)
    assert rows(standby) == [1]
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        standby.execute("INSERT INTO t VALUES (2)")


async def test_a_multi_host_url_reaches_the_promoted_standby(pg_cluster: PgCluster) -> None:
    """libpq's failover as psycopg and its pool do it: with ``target_session_attrs=read-write``
    the standby is skipped while it is one, and takes the writes once promoted."""
    primary, standby = await asyncio.to_thread(pg_cluster.primary_with_standby, synchronous=True)
    primary.execute("CREATE TABLE t (x int)")
    primary.execute("INSERT INTO t VALUES (1)")
    url = multi_host_url(standby, primary)  # the standby first: it is passed over
    assert url == (
        f"postgresql://postgres@127.0.0.1:{standby.port},127.0.0.1:{primary.port}/postgres"
        "?target_session_attrs=read-write&connect_timeout=2"
    )
    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=2,
        open=False,
        timeout=20,
        check=AsyncConnectionPool.check_connection,
        kwargs={"autocommit": True},
    )
    async with pool:
        async with pool.connection() as conn:
            assert conn.info.port == primary.port
            await conn.execute("INSERT INTO t VALUES (2)")

        await asyncio.to_thread(primary.stop, "immediate")
        await asyncio.to_thread(standby.promote)

        async with pool.connection() as conn:
            assert conn.info.port == standby.port
            await conn.execute("INSERT INTO t VALUES (3)")
            cur = await conn.execute("SELECT x FROM t ORDER BY x")
            assert [r[0] for r in await cur.fetchall()] == [1, 2, 3]


def test_the_cluster_of_a_dead_process_is_cleaned_up(pg_cluster: PgCluster) -> None:
    code = (
        "import os\n"
        "from tests.utils.pg_cluster import PgCluster\n"
        "cluster = PgCluster()\n"
        "server = cluster.server()\n"
        "print(cluster.base_dir, server.pid, server.url, flush=True)\n"
        "os._exit(0)  # no teardown: the server is left running\n"
    )
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    base_dir, pid, url = out.stdout.split()
    with psycopg.connect(url) as conn:  # the orphan server still runs
        assert conn.execute("SELECT 1").fetchone() == (1,)

    assert Path(base_dir) in reap_leftovers()

    assert not Path(base_dir).exists()
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    assert pg_cluster.base_dir.exists()  # a live process's cluster is left alone
