"""A throw-away database for one evaluation: ``eval_<uuid>`` on an admin URL, dropped after."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ADMIN_URL_ENV = "THREADLINE_TEST_DATABASE_URL"
PREFIX = "eval_"


def admin_url(explicit: str | None = None) -> str:
    """``explicit``, else ``$THREADLINE_TEST_DATABASE_URL``, else the local default."""
    return explicit or os.environ.get(ADMIN_URL_ENV) or DEFAULT_ADMIN_URL


def with_dbname(url: str, dbname: str) -> str:
    """``url`` (a ``postgresql://`` URL) naming database ``dbname``; query parameters kept."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"expected a postgresql:// URL, not {url!r}")
    if "dbname=" in parts.query:
        raise ValueError(f"name the database in the URL's path, not its query: {url!r}")
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))


def create_database(admin: str) -> str:
    """Create ``eval_<uuid>``; returns its URL."""
    name = f"{PREFIX}{uuid.uuid4().hex}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_dbname(admin, name)


def drop_database(admin: str, url: str) -> None:
    """Drop the database ``url`` names (only an ``eval_`` one), closing its connections."""
    name = conninfo_to_dict(url).get("dbname")
    if not (isinstance(name, str) and name.startswith(PREFIX)):
        raise ValueError(f"refusing to drop {name!r}: not an evaluation database")
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextmanager
def fresh_database(admin: str) -> Iterator[str]:
    url = create_database(admin)
    try:
        yield url
    finally:
        drop_database(admin, url)
