"""The checkpointer on the pool (``api.durable.saver_pool.SaverPool``): each call borrows a stock
``AsyncPostgresSaver`` of its own, so calls run at once without any attribute of the library's
replaced, and a clone LangGraph asks for (``with_allowlist``) reads through its own ``serde``."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from api.durable.saver import PooledSaver
from api.platform.database import open_pool, prepare_schema


async def _waiting_deletes(database_url: str) -> int:
    """Deletes of checkpoints waiting for a lock now (a connection of its own: within a
    transaction, PostgreSQL answers from the activity it saw first)."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database() AND query LIKE 'DELETE FROM checkpoints%%'"
        )
        row = await cur.fetchone()
        return row[0] if row else 0


async def test_calls_run_at_once_each_on_a_stock_saver_of_its_own(
    runtime: Any, database_url: str
) -> None:
    """Three deletes wait for a row lock together: one stock saver's lock would hold two of
    them back. The library's own lock is still the library's."""
    saver = runtime.saver
    threads = [str(uuid.uuid4()) for _ in range(3)]
    for thread_id in threads:
        config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        await saver.aput(config, empty_checkpoint(), {}, {})
    locker = await psycopg.AsyncConnection.connect(database_url)
    async with locker:
        async with locker.transaction():
            await locker.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = ANY(%s) FOR UPDATE", (threads,)
            )
            deletes = [asyncio.create_task(saver.adelete_thread(t)) for t in threads]
            deadline = time.monotonic() + 10
            while (waiting := await _waiting_deletes(database_url)) < len(threads):
                assert time.monotonic() < deadline, f"{waiting} deletes waited at once"
                await asyncio.sleep(0.02)
        await asyncio.gather(*deletes)
    assert isinstance(saver.lock, asyncio.Lock) and not saver.lock.locked()
    for thread_id in threads:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        assert await saver.aget_tuple(config) is None


async def test_a_clone_with_an_allowlist_reads_through_its_own_serde(database_url: str) -> None:
    async with open_pool(database_url, max_size=4) as pool:
        serde = JsonPlusSerializer(allowed_msgpack_modules=[("tests", "Thing")])
        saver = PooledSaver(pool, concurrency=2, serde=serde)
        await prepare_schema(pool, saver)
        clone = saver.with_allowlist([("tests", "Other")])
        assert isinstance(clone, PooledSaver) and clone is not saver
        assert {id(s.serde) for s in clone.idle} == {id(clone.serde)} != {id(saver.serde)}
        assert clone.slots is saver.slots and clone.held is saver.held
        config: Any = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        version = clone.get_next_version(None, None)
        checkpoint["channel_values"] = {"notes": ["a", "b"]}
        checkpoint["channel_versions"] = {"notes": version}
        saved = await clone.aput(config, checkpoint, {}, {"notes": version})
        read = await saver.aget_tuple(saved)
        assert read is not None and read.checkpoint["channel_values"] == {"notes": ["a", "b"]}
