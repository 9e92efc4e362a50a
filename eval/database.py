"""Throw-away databases on an admin URL: ``<prefix><uuid>``, dropped after (evaluation, soak,
tests)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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


def create_database(admin: str, *, prefix: str = PREFIX) -> str:
    """Create ``<prefix><uuid>``; returns its URL."""
    name = f"{prefix}{uuid.uuid4().hex}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_dbname(admin, name)


def drop_database(admin: str, url: str, *, prefix: str = PREFIX) -> None:
    """Drop the database ``url`` names (only a ``<prefix>`` one), closing its connections."""
    name = conninfo_to_dict(url).get("dbname")
    if not (isinstance(name, str) and name.startswith(prefix)):
        raise ValueError(f"refusing to drop {name!r}: not a {prefix}* database")
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextmanager
def fresh_database(admin: str, *, prefix: str = PREFIX) -> Iterator[str]:
    """A new empty database for the duration of the block."""
    url = create_database(admin, prefix=prefix)
    try:
        yield url
    finally:
        drop_database(admin, url, prefix=prefix)
