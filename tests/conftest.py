"""Shared fixtures: real PostgreSQL (a fresh database per test), settings, an open runtime.

PostgreSQL comes from ``THREADLINE_TEST_DATABASE_URL`` (an admin URL such as
``postgresql://postgres@127.0.0.1:5432/postgres``) when it is set; otherwise one embedded server
is started for the whole session in a temporary directory (see ``embedded_data_dir``) and stopped
at the end, so the suite runs on a machine with nothing installed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from api.engine.runtime import Runtime
from api.lifecycle import open_serving_runtime
from api.platform.embedded import start_embedded
from api.platform.settings import Settings
from tests.utils.db import TEST_DATABASE_ENV, create_database, drop_database, embedded_data_dir

LEAKY_ENV = ("DATABASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")
"""Variables of the machine that ``Settings`` or the agent's ``AgentSettings`` read and tests
must not inherit."""


def scrubbed_environ() -> dict[str, str]:
    """``os.environ`` without anything either settings class would read (for subprocesses)."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in LEAKY_ENV and not (k.startswith("THREADLINE_") and k != TEST_DATABASE_ENV)
    }


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """An admin URL of a PostgreSQL server that tests create databases on."""
    configured = os.environ.get(TEST_DATABASE_ENV)
    if configured:
        yield configured
        return
    with embedded_data_dir() as data_dir:
        yield start_embedded(data_dir)


@pytest.fixture
def database_url(pg_admin_url: str) -> Iterator[str]:
    """The URL of a new, empty database, dropped after the test."""
    url = create_database(pg_admin_url)
    try:
        yield url
    finally:
        drop_database(pg_admin_url, url)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No machine variable that either settings class reads leaks into the test."""
    for name in list(os.environ):
        if name in LEAKY_ENV or (name.startswith("THREADLINE_") and name != TEST_DATABASE_ENV):
            monkeypatch.delenv(name)


@pytest.fixture
def settings(database_url: str, tmp_path: Path, clean_env: None) -> Settings:
    """Settings on the test's database and data directory, with short leases and polls."""
    return Settings(
        database_url=database_url,
        data_dir=tmp_path / "data",
        lease_seconds=3,
        heartbeat_seconds=0.5,
        poll_seconds=0.2,
    )


@pytest.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """An open runtime (pool, migrated schema, checkpointer, the built-in graph)."""
    async with open_serving_runtime(settings) as rt:
        yield rt
