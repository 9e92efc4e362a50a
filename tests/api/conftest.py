"""Fixtures for tests that drive real ``threadline serve`` processes (``tests.utils.server``).

- ``module_database_url``: a fresh database shared by one test module, dropped after it.
- ``server``: one server per test module on that database, with short leases; a module sets
  ``SERVER_ENV = {...}`` to add environment variables (``THREADLINE_MAX_BODY_BYTES``, ...).
- ``client`` / ``http``: the official SDK client and a plain ``httpx`` client on ``server``.
- ``one_graph_project``: a server of a one-file project from a ``langgraph.json``.
- ``make_server``: a factory for servers a test starts, kills and restarts itself; every one is
  killed at teardown, with the tool processes a killed server left behind.
- ``keys_server``: a started server with built-in API keys (``THREADLINE_AUTH=keys``), for
  tenancy tests (``tests.utils.keys.create_key`` makes its callers).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.utils.db import create_database, drop_database
from tests.utils.processes import kill_strays
from tests.utils.server import ServerProcess, serving

FAST = {"lease_seconds": 3.0, "heartbeat_seconds": 0.5, "poll_seconds": 0.2}
"""Short leases and polls: a takeover happens within seconds."""


@pytest.fixture(scope="module")
def module_database_url(pg_admin_url: str) -> Iterator[str]:
    """A new, empty database for one test module."""
    url = create_database(pg_admin_url)
    try:
        yield url
    finally:
        drop_database(pg_admin_url, url)


@contextmanager
def one_graph_project(
    database_url: str, root: Path, graph_id: str, filename: str, source: str
) -> Iterator[ServerProcess]:
    """A server of a project in ``root``: ``source`` as ``filename``, its ``graph`` served as
    ``graph_id`` by a ``langgraph.json``."""
    (root / "project").mkdir()
    (root / "project" / filename).write_text(source)
    config = root / "project" / "langgraph.json"
    config.write_text(json.dumps({"graphs": {graph_id: f"./{filename}:graph"}}))
    proc = ServerProcess(database_url, root / "data", config=config, name=graph_id, **FAST)
    with serving(proc):
        yield proc


@pytest.fixture(scope="module")
def module_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, module_database_url: str, module_data_dir: Path
) -> Iterator[ServerProcess]:
    """A running server for the whole module (its own database and data directory)."""
    env = getattr(request.module, "SERVER_ENV", {})
    config = getattr(request.module, "SERVER_CONFIG", None)
    proc = ServerProcess(
        module_database_url, module_data_dir, env=env, config=config, name="module", **FAST
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        kill_strays(module_data_dir)


@pytest.fixture
def make_server() -> Iterator[Callable[..., ServerProcess]]:
    """``make_server(database_url, data_dir, **kwargs)``: a ServerProcess, not started yet."""
    made: list[ServerProcess] = []

    def make(database_url: str, data_dir: Path, **kwargs: Any) -> ServerProcess:
        options = {**FAST, **kwargs}
        proc = ServerProcess(database_url, data_dir, **options)
        made.append(proc)
        return proc

    try:
        yield make
    finally:
        for proc in made:
            proc.stop()
        for data_dir in {proc.data_dir for proc in made}:
            kill_strays(data_dir)


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[Any]:
    """The official ``langgraph-sdk`` client on the module's server, closed after the test."""
    from langgraph_sdk import get_client

    async with get_client(url=server.url) as c:
        yield c


@pytest.fixture
async def http(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client on the module's server (reads wait up to 60 s)."""
    async with httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(10.0, read=60.0)) as c:
        yield c


@pytest.fixture
def keys_server(
    make_server: Callable[..., ServerProcess], pg_admin_url: str, tmp_path: Path
) -> Iterator[ServerProcess]:
    """A server with built-in API keys and the default policy (write_file asks), on its own
    database (on the module's, the module server's workers would run its runs too)."""
    url = create_database(pg_admin_url)
    proc = make_server(url, tmp_path, env={"THREADLINE_AUTH": "keys"})
    try:
        yield proc.start()
    finally:
        proc.stop()
        drop_database(pg_admin_url, url)
