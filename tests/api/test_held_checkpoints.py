"""A served run's input checkpoint and the loop's first after it (``__start__``'s) are held
back and stored with whatever the run stores next of its thread
(``api.durable.run_memory.HeldCheckpoint``):
its next checkpoint, task writes no checkpoint took along in time, or on their own when the
graph stops first. Each is stored as the stock saver stores it, and nothing of a node's is
durable before them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from api.durable import task_writes
from api.durable.hub import Hub
from api.durable.run_memory import run_configurable
from api.durable.saver import PooledSaver
from api.engine.execution import Executor
from api.store import runs, threads
from tests.utils.served import barrier, one_node_graph, served_config


async def _checkpoints(runtime: Any, thread_id: str) -> list[tuple[str, str, int, str]]:
    """The thread's checkpoints, oldest first: namespace, source, step and the transaction
    that stored it."""
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT checkpoint_ns, metadata->>'source' AS source,"
            " (metadata->>'step')::int AS step, xmin::text AS stored_in"
            " FROM checkpoints WHERE thread_id = %s ORDER BY checkpoint_id",
            (thread_id,),
        )
        return [
            (r["checkpoint_ns"], r["source"], r["step"], r["stored_in"])
            for r in await cur.fetchall()
        ]


async def _write_transactions(runtime: Any, thread_id: str) -> set[str]:
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT xmin::text AS stored_in FROM checkpoint_writes WHERE thread_id = %s",
            (thread_id,),
        )
        return {r["stored_in"] for r in await cur.fetchall()}


async def _held_input_and_start(saver: PooledSaver, thread_id: str) -> Any:
    """LangGraph's first two saves of a served run: the input, then ``__start__``'s; the config
    naming the second, as the first node's tasks get it."""
    config = served_config(thread_id, served=True)
    config["configurable"]["checkpoint_ns"] = ""
    saved = await saver.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    then = {"configurable": {**saved["configurable"], **run_configurable(barrier)}}
    saved = await saver.aput(then, empty_checkpoint(), {"source": "loop", "step": 0}, {})
    return {"configurable": {**saved["configurable"], **run_configurable(barrier)}}


async def test_the_input_and_start_checkpoints_go_in_the_next_checkpoints_statement(
    runtime: Any,
) -> None:
    saver, thread_id = runtime.saver, str(uuid.uuid4())
    after_start = await _held_input_and_start(saver, thread_id)
    assert await _checkpoints(runtime, thread_id) == []  # neither stored yet
    await saver.aput(after_start, empty_checkpoint(), {"source": "loop", "step": 1}, {})
    stored = await _checkpoints(runtime, thread_id)
    assert [c[:3] for c in stored] == [("", "input", -1), ("", "loop", 0), ("", "loop", 1)]
    assert len({c[3] for c in stored}) == 1, stored  # one transaction
    assert saver.held == {}


async def test_writes_no_checkpoint_took_along_in_time_take_the_held_checkpoints(
    runtime: Any,
) -> None:
    """A first node that runs long (a model) and whose task wrote: the writes are stored when
    the delay is over, and the two held checkpoints before them in the same transaction, so a
    takeover finds the node's finished writes where LangGraph looks for them."""
    saver, thread_id = runtime.saver, str(uuid.uuid4())
    after_start = await _held_input_and_start(saver, thread_id)
    await asyncio.wait_for(saver.aput_writes(after_start, [("items", ["done"])], "task-1"), 10)
    stored = await _checkpoints(runtime, thread_id)
    assert [c[:3] for c in stored] == [("", "input", -1), ("", "loop", 0)]
    assert {c[3] for c in stored} == await _write_transactions(runtime, thread_id)
    assert saver.held == {}
    pending = await saver.aget_tuple(served_config(thread_id, served=False))
    assert pending is not None and pending.metadata["step"] == 0
    assert [(task, channel) for task, channel, _ in pending.pending_writes] == [("task-1", "items")]


async def test_writes_whose_delay_ends_as_a_checkpoint_takes_the_held_ones_are_stored(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delay of a task's writes ends (their statement is spawned, to go with the held
    checkpoints) and the next checkpoint takes the held ones before it runs: the writes are
    stored all the same, and their task is told so (it waited forever: a benchmark's hang)."""
    monkeypatch.setattr(task_writes, "LINGER_SECONDS", 30.0)  # the delay ends when told to
    saver, thread_id = runtime.saver, str(uuid.uuid4())
    after_start = await _held_input_and_start(saver, thread_id)
    write = asyncio.create_task(saver.aput_writes(after_start, [("items", ["done"])], "task-1"))
    await asyncio.sleep(0)  # queued
    saver.writes._linger_over(thread_id)
    await saver.aput(after_start, empty_checkpoint(), {"source": "loop", "step": 1}, {})
    assert await asyncio.wait_for(write, 10) is None
    assert len(await _write_transactions(runtime, thread_id)) == 1
    stored = await _checkpoints(runtime, thread_id)
    assert [c[:3] for c in stored] == [("", "input", -1), ("", "loop", 0), ("", "loop", 1)]
    assert saver.held == {}


async def test_a_subgraphs_checkpoint_comes_after_the_parents_held_ones(runtime: Any) -> None:
    """A subgraph saving while the parent's checkpoints are held: the parent's are stored
    first, in their own namespace, then the subgraph's in its own."""
    saver, thread_id = runtime.saver, str(uuid.uuid4())
    after_start = await _held_input_and_start(saver, thread_id)
    child = {"configurable": {**after_start["configurable"], "checkpoint_ns": "node:task-1"}}
    child["configurable"].pop("checkpoint_id")
    await saver.aput(child, empty_checkpoint(), {"source": "input", "step": -1}, {})
    stored = await _checkpoints(runtime, thread_id)
    assert sorted(c[:3] for c in stored) == [
        ("", "input", -1),
        ("", "loop", 0),
        ("node:task-1", "input", -1),
    ]


def _checked(old: list[str], new: list[str]) -> list[str]:
    if "refused" in new:
        raise ValueError("this input is refused")
    return old + new


class Items(TypedDict, total=False):
    items: Annotated[list[str], _checked]


async def _served_history(
    runtime: Any, graph_id: str, graph: Any, kwargs: dict[str, Any], status: str
) -> list[tuple[Any, ...]]:
    """Execute a run of ``graph`` with ``kwargs`` as the service does; its thread's history,
    newest first, once it ended with ``status``."""
    runtime.graphs[graph_id] = graph
    served = str(uuid.uuid4())
    async with runtime.pool.connection() as conn:
        await threads.create(conn, served, {}, None)
        await runs.insert(
            conn,
            thread_id=served,
            assistant_id=graph_id,
            kwargs={"stream_mode": ["updates"], **kwargs},
            metadata={},
            multitask_strategy="reject",
        )
        [(run, last_seq)] = await runs.claim(conn, "test", 30.0)
    await Executor(runtime, Hub(runtime.database.url)).execute(run, last_seq)
    async with runtime.pool.connection() as conn:
        ended = await runs.by_id(conn, run.run_id)
    assert ended is not None and ended["status"] == status
    # The attempt's end dropped what the saver kept of it (``PooledSaver.forget``).
    assert runtime.saver.held == {} and runtime.saver.written == {}
    return [
        (s.metadata["source"], s.metadata["step"], s.values, s.next)
        async for s in graph.aget_state_history(served_config(served, served=False))
    ]


async def test_an_input_checkpoint_no_later_one_took_along_is_stored_when_the_run_stops(
    runtime: Any,
) -> None:
    """A served run that fails right after its input (the reducer refuses it, in
    ``__start__``'s step): its thread's history has the input checkpoint the stock saver
    stores for the same graph and input."""
    graph = one_node_graph(Items, runtime.saver, lambda _: {"items": ["node"]})
    kwargs = {"input": {"items": ["refused"]}}
    history = await _served_history(runtime, "refusing", graph, kwargs, "error")
    with pytest.raises(ValueError, match="refused"):
        await graph.ainvoke({"items": ["refused"]}, served_config(str(uuid.uuid4()), served=False))
    assert history == [("input", -1, {"items": []}, ("__start__",))]


async def test_held_checkpoints_of_a_run_stopped_before_its_first_node_are_stored(
    runtime: Any,
) -> None:
    """A breakpoint before the first node: the graph stops with both checkpoints held and no
    later checkpoint; both are stored as the stock saver stores them."""
    graph = one_node_graph(Items, runtime.saver, lambda _: {"items": ["node"]})
    kwargs = {"input": {"items": ["in"]}, "interrupt_before": ["node"]}
    history = await _served_history(runtime, "paused", graph, kwargs, "success")
    stock = served_config(str(uuid.uuid4()), served=False)
    await graph.ainvoke({"items": ["in"]}, stock, interrupt_before=["node"], durability="sync")
    stock_history = [
        (s.metadata["source"], s.metadata["step"], s.values, s.next)
        async for s in graph.aget_state_history(stock)
    ]
    assert history == stock_history
    assert history == [
        ("loop", 0, {"items": ["in"]}, ("node",)),
        ("input", -1, {"items": []}, ("__start__",)),
    ]
