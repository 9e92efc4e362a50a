"""Holding a checkpoint's row lock, so that a statement writing that checkpoint waits mid-way
(for tests of what a cancellation during a checkpoint's write does)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg


@asynccontextmanager
async def checkpoint_locked(
    database_url: str, thread_id: str, checkpoint_id: str
) -> AsyncIterator[psycopg.AsyncConnection]:
    """The checkpoint's row locked (``FOR UPDATE``) by another connection until the block ends:
    writing that checkpoint again waits for it."""
    locker = await psycopg.AsyncConnection.connect(database_url)
    async with locker, locker.transaction():
        await locker.execute(
            "SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_id = %s FOR UPDATE",
            (thread_id, checkpoint_id),
        )
        yield locker


async def someone_waits_for_a_lock(conn: psycopg.AsyncConnection, timeout: float = 10.0) -> None:
    """Until another backend waits for a lock (the one ``conn`` holds)."""
    deadline = time.monotonic() + timeout
    while True:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND pid <> pg_backend_pid()"
        )
        row = await cur.fetchone()
        if row and row[0]:
            return
        assert time.monotonic() < deadline, "nothing waited for the lock"
        await asyncio.sleep(0.01)
