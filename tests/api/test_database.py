"""PostgreSQL set-up: the embedded server from nothing, migrations, the checkpointer's tables."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from psycopg_pool import AsyncConnectionPool

from api.builtin_agent import BUILTIN_ASSISTANT
from api.engine.runtime import Runtime
from api.lifecycle import open_serving_runtime
from api.platform.database import _migrations, migrate, open_pool, resolve_database
from api.platform.settings import Settings
from tests.conftest import scrubbed_environ
from tests.utils.db import embedded_data_dir, stop_embedded
from tests.utils.processes import processes_in

SERVICE_TABLES = {
    "threads",
    "runs",
    "run_events",
    "audit_log",
    "approvals",
    "threadline_migrations",
}
CHECKPOINT_TABLES = {
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
}


async def table_names(pool: AsyncConnectionPool[Any]) -> set[str]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
        return {row["table_name"] for row in await cur.fetchall()}


async def applied_migrations(pool: AsyncConnectionPool[Any]) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT version, name, applied_at FROM threadline_migrations ORDER BY version"
        )
        return [(r["version"], r["name"], r["applied_at"]) for r in await cur.fetchall()]


def expected_migrations() -> list[tuple[int, str]]:
    found = [(version, name) for version, name, _sql in _migrations()]
    assert found, "no migration files were found in the api package"
    return found


@pytest.mark.slow
async def test_embedded_server_from_an_empty_data_dir(clean_env: None) -> None:
    with embedded_data_dir() as parent:
        data_dir = parent / "fresh"
        assert not data_dir.exists()
        database = await resolve_database(None, data_dir)
        assert database.mode == "embedded"
        assert (data_dir / "postgres" / "PG_VERSION").exists()

        settings = Settings(database_url=None, data_dir=data_dir)
        assert settings.database_url is None
        async with open_serving_runtime(settings) as rt:
            assert rt.database.mode == "embedded"
            assert rt.database.url == database.url  # the running server is reused
            assert await table_names(rt.pool) >= SERVICE_TABLES | CHECKPOINT_TABLES
            first = await applied_migrations(rt.pool)
            assert [(v, n) for v, n, _at in first] == expected_migrations()
            async with rt.pool.connection() as conn:
                assert await migrate(conn) == []

            # The checkpointer works on it: a run leaves checkpoints behind.
            thread_id = str(uuid.uuid4())
            graph = rt.graphs[BUILTIN_ASSISTANT]
            await graph.ainvoke(
                {"messages": [HumanMessage("hello")]},
                {"configurable": {"thread_id": thread_id}},
                durability="sync",
            )
            async with rt.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (thread_id,)
                )
                row = await cur.fetchone()
                assert row is not None and row["n"] > 0

        # A restart applies nothing again.
        async with open_serving_runtime(settings) as rt:
            assert await applied_migrations(rt.pool) == first

        await asyncio.to_thread(stop_embedded, data_dir)
        assert not (data_dir / "postgres" / "postmaster.pid").exists()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(database.url, connect_timeout=2).close()


async def test_external_database_is_migrated_at_start(runtime: Runtime) -> None:
    assert runtime.database.mode == "external"
    assert await table_names(runtime.pool) >= SERVICE_TABLES | CHECKPOINT_TABLES
    assert [(v, n) for v, n, _at in await applied_migrations(runtime.pool)] == (
        expected_migrations()
    )


async def test_replicas_starting_together_migrate_once(settings: Settings) -> None:
    """Migrations and ``setup()`` run under an advisory lock, so concurrent starts don't clash."""
    async with AsyncExitStack() as stack:
        runtimes = await asyncio.gather(
            *(stack.enter_async_context(open_serving_runtime(settings)) for _ in range(3))
        )
        for rt in runtimes:
            assert await table_names(rt.pool) >= SERVICE_TABLES | CHECKPOINT_TABLES
        assert [(v, n) for v, n, _at in await applied_migrations(runtimes[0].pool)] == (
            expected_migrations()
        )


# -- a server left running by a killed process --------------------------------------------------

USER = """
import sys
from pathlib import Path

from api.platform.embedded import start_embedded

print("ready", start_embedded(Path(sys.argv[1])), flush=True)
sys.stdin.readline()  # then exits normally
"""


def start_user(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A process that starts (or reuses) the embedded server of ``data_dir``; its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", USER, str(data_dir)],
        env=scrubbed_environ(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("ready "), line + proc.stdout.read().decode()
    return proc, line.split()[1]


def finish(proc: subprocess.Popen[bytes]) -> None:
    """Let the process exit normally (its exit handlers run)."""
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    close_pipes(proc)


def close_pipes(proc: subprocess.Popen[bytes]) -> None:
    """Close our ends of the process's pipes once it has exited. Not read to EOF: the server
    it started may hold the other end of its stdout."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def postgres_of(data_dir: Path, *, gone_within: float = 0.0) -> list[int]:
    """The server's processes (they work in its data directory); with ``gone_within``, waits
    that long for them to exit (``pg_ctl stop`` returns when the postmaster is gone, its last
    children may take a moment more)."""
    deadline = time.monotonic() + gone_within
    while (left := processes_in(data_dir / "postgres")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.mark.slow
def test_a_server_a_killed_process_left_is_adopted_and_stopped_by_its_last_live_user() -> None:
    with embedded_data_dir() as parent:
        data_dir = parent / "data"
        first, url = start_user(data_dir)
        first.kill()  # kill -9: its exit handlers never run
        first.wait()
        close_pipes(first)
        assert postgres_of(data_dir), "the server should outlive a killed process"

        second, adopted = start_user(data_dir)  # adopts the server the dead one left
        assert adopted == url
        third, _ = start_user(data_dir)  # another live user
        finish(second)
        assert postgres_of(data_dir), "stopped while another live process used it"
        psycopg.connect(url, connect_timeout=5).close()

        finish(third)  # the last live user: it stops the server
        assert postgres_of(data_dir, gone_within=10) == []
        assert not (data_dir / "postgres" / "postmaster.pid").exists()


async def test_nul_from_a_graph_is_stored_as_a_replacement_character(runtime: Any) -> None:
    """Model output and tool results may hold NUL, which jsonb refuses: the thread's values and
    the audit log store U+FFFD instead of failing the run's bookkeeping."""
    from api.store import audit, threads
    from api.store.audit import ToolRecord

    async with runtime.pool.connection() as conn:
        await threads.create(conn, "nul-thread", {})
        await threads.refresh_status(
            conn, "nul-thread", after="idle", values={"messages": [{"content": "a\0b"}]}
        )
        found = await threads.get(conn, "nul-thread")
        assert found is not None
        assert found["values"] == {"messages": [{"content": "a\ufffdb"}]}
        await audit.record_tool(
            conn,
            thread_id="nul-thread",
            run_id="00000000-0000-0000-0000-000000000001",
            attempt=1,
            record=ToolRecord(
                tool="run_command",
                tool_call_id="c1",
                args={"command": ["cat", "bin\0"]},
                ok=True,
                duration=0.1,
                output="x\0y",
                result="x\0y",
            ),
        )
        prior = await audit.prior_result(conn, "nul-thread", "nul-thread:c1")
        assert prior is not None and prior.content == "x\ufffdy"


async def test_the_pool_opens_its_minimum_in_the_background_and_keeps_it(database_url: str) -> None:
    """``open_pool`` returns with one connection; ``min_size`` more follow without a request
    asking for them (a burst on a cold pool would wait for each, one at a time)."""
    async with open_pool(database_url, max_size=6, min_size=4) as pool:
        deadline = time.monotonic() + 10
        while pool.get_stats()["pool_size"] < 4:
            assert time.monotonic() < deadline, pool.get_stats()
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        assert pool.get_stats()["pool_size"] == 4  # opened and kept; not grown past it
    async with open_pool(database_url, max_size=3, min_size=10) as pool:
        deadline = time.monotonic() + 10
        while pool.get_stats()["pool_size"] < 3:
            assert time.monotonic() < deadline, pool.get_stats()
            await asyncio.sleep(0.02)
        assert pool.max_size == 3  # the minimum never exceeds the maximum


async def test_the_pool_hands_out_the_connection_returned_last(database_url: str) -> None:
    """Statements are prepared, and planned, per connection: at low load the same warm
    connections serve them, not each of the pool's in turn (``RecentFirstPool``)."""
    async with open_pool(database_url, max_size=4, min_size=4) as pool:
        deadline = time.monotonic() + 10
        # All four in the pool (``pool_size`` counts one being opened; it joins as the newest).
        while pool.get_stats().get("pool_available", 0) < 4:
            assert time.monotonic() < deadline, pool.get_stats()
            await asyncio.sleep(0.02)
        backends = []
        for _ in range(6):  # one at a time: always the same connection
            async with pool.connection() as conn:
                backends.append(conn.info.backend_pid)
        assert len(set(backends)) == 1, backends
        async with pool.connection() as a, pool.connection() as b:
            pids = (a.info.backend_pid, b.info.backend_pid)
        # ``a`` went back last (the inner block's exit order is b, then a).
        async with pool.connection() as again:
            assert again.info.backend_pid == pids[0], (pids, again.info.backend_pid)
        assert pool.get_stats()["pool_size"] == 4
