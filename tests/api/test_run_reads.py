"""What a run reads of its own thread (``api.durable.run_memory``): a run claimed at once, or a
first
attempt claimed from the queue, on a thread with no checkpoint skips LangGraph's first read of
it, a run on a thread with one reads it; the read of its state when it stops is answered with
the checkpoint it stored last, as the database would answer it, unless a task wrote since."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command, interrupt

from api.durable.run_memory import RUN_KEY, NoCheckpointYet, SaverRun
from api.durable.saver import PooledSaver
from api.store import runs, threads
from api.store.claimed_run import ClaimedRun
from tests.utils.runs import claimed_run
from tests.utils.served import State, barrier, channels_graph, one_node_graph, served_config


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
    assert inserted.claimed is not None
    return inserted.claimed.no_checkpoint


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


async def _ended(runtime: Any, run: ClaimedRun) -> None:
    async with runtime.pool.connection() as conn:
        await conn.execute("UPDATE runs SET status = 'success' WHERE run_id = %s", (run.run_id,))


async def test_a_first_attempt_claimed_from_the_queue_says_whether_its_thread_has_a_checkpoint(
    runtime: Any,
) -> None:
    """Read in the claim's statement; a later attempt always reads the thread, since the one
    before it may have saved a checkpoint."""
    thread_id = str(uuid.uuid4())
    async with runtime.pool.connection() as conn:
        await threads.create(conn, thread_id, {}, None)
    first = await claimed_run(runtime, thread_id)
    assert (first.attempt, first.no_checkpoint) == (1, True)
    async with runtime.pool.connection() as conn:  # its lease runs out: the next claim takes it
        await conn.execute(
            "UPDATE runs SET lease_until = now() - interval '1 second' WHERE run_id = %s",
            (first.run_id,),
        )
        [(again, _)] = await runs.claim(conn, "test", 30.0)
    assert (again.run_id, again.attempt, again.no_checkpoint) == (
        first.run_id,
        2,
        False,
    )
    await _ended(runtime, again)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    await runtime.saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    later = await claimed_run(runtime, thread_id)
    assert (later.attempt, later.no_checkpoint) == (1, False)
    await _ended(runtime, later)


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
    run = SaverRun(barrier, no_checkpoint=hint)

    def config(**extra: str) -> Any:
        return {"configurable": {"thread_id": thread_id, RUN_KEY: run, **extra}}

    assert await saver.aget_tuple(config(checkpoint_ns="sub:1")) is None  # none there: read
    assert not hint.used
    by_id = await saver.aget_tuple(config(checkpoint_id=saved["configurable"]["checkpoint_id"]))
    assert by_id is not None and not hint.used
    assert await saver.aget_tuple(config()) is None
    assert hint.used
    again = await saver.aget_tuple(config())
    assert again is not None and again.checkpoint["id"] == saved["configurable"]["checkpoint_id"]


def _stock(thread_id: str) -> Any:
    return served_config(thread_id, served=False)


def _served(thread_id: str) -> Any:
    return served_config(thread_id, served=True)


def _snapshot(state: Any) -> Any:
    return (state.values, state.next, state.config, state.parent_config, state.interrupts)


async def test_a_runs_last_read_is_the_checkpoint_it_stored_as_the_database_has_it(
    runtime: Any,
) -> None:
    saver, thread_id = runtime.saver, str(uuid.uuid4())
    graph = channels_graph(saver)
    await graph.ainvoke({}, _served(thread_id), durability="sync")
    last = saver.written[thread_id]
    assert await saver.aget_tuple(_served(thread_id)) is last.tuple  # not read again
    mine, stored = (
        await graph.aget_state(_served(thread_id)),
        await graph.aget_state(_stock(thread_id)),
    )
    assert _snapshot(mine) == _snapshot(stored)
    assert mine.values["label"] == "ended" and mine.next == ()
    assert mine.metadata is not None and stored.metadata is not None
    assert mine.metadata["step"] == stored.metadata["step"]
    saver.forget(thread_id)
    assert thread_id not in saver.written


def _asking(saver: PooledSaver) -> Any:
    def ask(state: State) -> State:
        return {"label": str(interrupt({"question": "go on?"}))}

    return one_node_graph(State, saver, ask)


async def test_a_run_whose_task_wrote_after_its_last_checkpoint_reads_the_database(
    runtime: Any,
) -> None:
    """An interrupt is a write after the last checkpoint: the run's read shows it pending."""
    saver, thread_id = runtime.saver, str(uuid.uuid4())
    graph = _asking(saver)
    await graph.ainvoke({"label": "start"}, _served(thread_id), durability="sync")
    assert thread_id not in saver.written
    mine = await graph.aget_state(_served(thread_id))
    assert _snapshot(mine) == _snapshot(await graph.aget_state(_stock(thread_id)))
    assert [i.value for i in mine.interrupts] == [{"question": "go on?"}]
    await graph.ainvoke(Command(resume="yes"), _served(thread_id), durability="sync")
    assert (await graph.aget_state(_served(thread_id))).values["label"] == "yes"
