"""Holding a checkpoint's row lock, so that a statement writing that checkpoint waits mid-way
(for tests of what a cancellation during a checkpoint's write does)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest


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


async def cancel_while_it_waits(
    database_url: str,
    thread_id: str,
    checkpoint_id: str,
    write: Coroutine[Any, Any, Any],
    meanwhile: Callable[[], None] = lambda: None,
) -> None:
    """Run ``write`` (a checkpoint's) while the checkpoint's row is locked, cancel it once it
    waits for the lock, call ``meanwhile`` (still locked), release the lock: ``write`` must
    still run to its end, then raise the cancellation."""
    async with checkpoint_locked(database_url, thread_id, checkpoint_id) as locker:
        task = asyncio.create_task(write)
        await someone_waits_for_a_lock(locker)
        task.cancel()
        await asyncio.sleep(0.1)
        assert not task.done()  # the statement waits for the lock, cancelled or not
        meanwhile()
    with pytest.raises(asyncio.CancelledError):
        await task
