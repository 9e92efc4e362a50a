"""Throw-away benchmark databases on the PostgreSQL server, and their statistics."""

from __future__ import annotations

import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
STAT_FIELDS = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted")


def database_url(admin_url: str, name: str) -> str:
    """``admin_url`` pointing at database ``name`` instead."""
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def new_name(prefix: str = "bench") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def create_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stats(admin_url: str, name: str, settle: float = 0.3) -> dict[str, int]:
    """Cumulative counters of database ``name`` (``pg_stat_database``).

    Backends flush their counters when they exit (or about once a second while busy), so read
    this after the pool or server that used the database has closed.
    """
    time.sleep(settle)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT {', '.join(STAT_FIELDS)} FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()
    return dict(zip(STAT_FIELDS, row or (0,) * len(STAT_FIELDS), strict=True))


def diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in STAT_FIELDS}


def connection_headroom(admin_url: str) -> dict[str, Any]:
    """``max_connections`` and how many are in use right now (by anyone)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int, count(*) FROM pg_stat_activity"
        ).fetchone()
        version = conn.execute("SHOW server_version").fetchone()
    assert row is not None
    return {
        "max_connections": row[0],
        "in_use": row[1],
        "server_version": version[0] if version else "?",
    }
