"""What a run's start reads: a run claimed at once on a thread with no checkpoint skips
LangGraph's first read of it (``api.saver.NoCheckpointYet``), a run on a thread with one reads it."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from api.saver import NO_CHECKPOINT_KEY, NoCheckpointYet
from api.store import runs, threads


async def _claimed_at_once(runtime: Any, thread_id: str) -> bool:
    async with runtime.pool.connection() as conn, conn.transaction():
        inserted = await runs.send_insert(
            conn,
            thread_id=thread_id,
            assistant_id="agent",
            kwargs={},
            metadata={},
            multitask_strategy="reject",
            start=("test", 30.0),
        )
        run = await inserted.row()
        await conn.execute("UPDATE runs SET status = 'success' WHERE run_id = %s", (run["run_id"],))
    return inserted.no_checkpoint


async def test_a_run_claimed_at_once_says_whether_its_thread_has_a_checkpoint(
    runtime: Any,
) -> None:
    thread_id = str(uuid.uuid4())
    async with runtime.pool.connection() as conn:
        await threads.create(conn, thread_id, {}, None)
    assert await _claimed_at_once(runtime, thread_id) is True
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    await runtime.saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert await _claimed_at_once(runtime, thread_id) is False


async def test_the_hint_answers_the_first_read_of_the_root_namespace_only(runtime: Any) -> None:
    """Given the hint (here, wrongly: the thread has a checkpoint), the first read of the
    thread's latest checkpoint answers nothing; a subgraph's namespace, a read of one
    checkpoint by id, and every later read go to the database."""
    saver, thread_id = runtime.saver, str(uuid.uuid4())
    saved = await saver.aput(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        empty_checkpoint(),
        {"source": "input", "step": -1},
        {},
    )
    hint = NoCheckpointYet()

    def config(**extra: str) -> Any:
        return {"configurable": {"thread_id": thread_id, NO_CHECKPOINT_KEY: hint, **extra}}

    assert await saver.aget_tuple(config(checkpoint_ns="sub:1")) is None  # none there: read
    assert not hint.used
    by_id = await saver.aget_tuple(config(checkpoint_id=saved["configurable"]["checkpoint_id"]))
    assert by_id is not None and not hint.used
    assert await saver.aget_tuple(config()) is None
    assert hint.used
    again = await saver.aget_tuple(config())
    assert again is not None and again.checkpoint["id"] == saved["configurable"]["checkpoint_id"]
