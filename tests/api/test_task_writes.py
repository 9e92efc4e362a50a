"""A run's task writes are stored with the step's checkpoint (``api.durable.task_writes``).

For a run the service executes, the writes of a step's tasks go in the statement of the
checkpoint that follows them (``api.store.checkpoint_tables.step``), not in one transaction each;
a task whose step goes on without it (a slow sibling) still has its writes stored on their own,
soon; and writes taken into a checkpoint's statement share its fate.
"""

from __future__ import annotations

import asyncio
import operator
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint

from api.contract.runs import RunCreate
from api.durable import task_writes
from api.durable.run_memory import delta_channels, run_configurable
from api.durable.saver import PooledSaver
from api.durable.task_writes import LINGER_SECONDS
from api.lifecycle import open_service
from api.store.events import EventRows
from tests.utils.fan_out import fan_out
from tests.utils.locks import cancel_while_it_waits
from tests.utils.tasks import counter

FAN_OUT = 3


class State(TypedDict, total=False):
    done: Annotated[list[int], operator.add]
    joined: bool


def _graph(saver: PooledSaver, slow: asyncio.Event | None = None) -> Any:
    """``fan`` sends ``FAN_OUT`` ``work`` tasks (task 0 waits for ``slow``, when given), then
    ``join``."""

    async def work(call: dict[str, int]) -> State:
        if slow is not None and call["i"] == 0:
            await slow.wait()
        return {"done": [call["i"]]}

    return fan_out(
        State, saver, fan=lambda _: {}, work=work, join=lambda _: {"joined": True}, calls=FAN_OUT
    )


class _Step:
    """What an events barrier yields (``api.durable.event_writer.CheckpointEvents``): here the
    events to take along, if any, and whether the statement carrying them succeeded."""

    def __init__(self, events: EventRows | None) -> None:
        self.events = events
        self.committed = False

    def take(self) -> EventRows | None:
        return self.events

    def stored(self) -> None:
        self.committed = True


def _events(
    events: EventRows | None = None,
) -> Callable[[], AbstractAsyncContextManager[_Step]]:
    """An events barrier (``SaverRun.events``) handing ``events`` to each checkpoint."""

    @asynccontextmanager
    async def barrier() -> AsyncIterator[_Step]:
        yield _Step(events)

    return barrier


async def _first_checkpoint(saver: PooledSaver) -> dict[str, Any]:
    """A new thread's first checkpoint, saved the stock way; its config's ``configurable``."""
    first = await saver.aput(
        {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}},
        empty_checkpoint(),
        {"step": -1},
        {},
    )
    return dict(first["configurable"])


def _config(thread_id: str, *, served: bool) -> Any:
    """A run as the service executes it (``served``: with the events barrier) or not."""
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if served:
        configurable.update(run_configurable(_events()))
    return {"configurable": configurable}


async def _writes(runtime: Any, thread_id: str) -> list[dict[str, Any]]:
    """Each stored write, with its transaction and that of the checkpoint after its own."""
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT w.task_id, w.task_path, w.idx, w.channel, w.type, w.blob,"
            " w.xmin::text AS written_in, c.xmin::text AS next_in"
            " FROM checkpoint_writes w LEFT JOIN checkpoints c ON c.thread_id = w.thread_id"
            " AND c.checkpoint_ns = w.checkpoint_ns AND c.parent_checkpoint_id = w.checkpoint_id"
            " WHERE w.thread_id = %s ORDER BY w.task_id, w.idx",
            (thread_id,),
        )
        return list(await cur.fetchall())


async def test_a_steps_task_writes_are_committed_with_the_checkpoint_after_them(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long enough that every checkpoint comes within it, on a slow machine too: none is stored
    # alone (the next test covers that).
    monkeypatch.setattr(task_writes, "LINGER_SECONDS", 5.0)
    saver = runtime.saver
    graph = _graph(saver)
    served, stock = str(uuid.uuid4()), str(uuid.uuid4())
    for thread_id, is_served in ((served, True), (stock, False)):
        final = await graph.ainvoke({}, _config(thread_id, served=is_served), durability="sync")
        assert sorted(final["done"]) == list(range(FAN_OUT)) and final["joined"]

    mine, theirs = await _writes(runtime, served), await _writes(runtime, stock)
    # The same writes are stored either way (fan, the three work tasks, join), byte for byte.
    assert len(mine) == len(theirs) >= FAN_OUT + 2

    def stored(w: dict[str, Any]) -> tuple[Any, ...]:
        return (w["task_path"], w["idx"], w["channel"], w["type"], bytes(w["blob"]))

    assert sorted(map(stored, mine)) == sorted(map(stored, theirs))
    # Served: each in the transaction of the checkpoint that follows its step.
    assert all(w["written_in"] == w["next_in"] for w in mine), mine
    # The stock path (no barrier): one transaction of its own each.
    assert not any(w["written_in"] == w["next_in"] for w in theirs), theirs
    assert len({w["written_in"] for w in theirs}) == len({w["task_id"] for w in theirs})
    # And the history reads the same: each checkpoint's pending writes are there.
    history = [s async for s in graph.aget_state_history(_config(served, served=False))]
    stock_history = [s async for s in graph.aget_state_history(_config(stock, served=False))]
    assert [len(s.tasks) for s in history] == [len(s.tasks) for s in stock_history]
    assert [sorted(str(t.result) for t in s.tasks) for s in history] == [
        sorted(str(t.result) for t in s.tasks) for s in stock_history
    ]


class DeltaState(TypedDict, total=False):
    done: Annotated[
        list[int], DeltaChannel(lambda left, writes: [*left, *(x for w in writes for x in w)])
    ]
    joined: bool


async def test_writes_to_a_delta_channel_are_stored_at_once_not_after_the_delay(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph saves a step's checkpoint only once the writes to a ``DeltaChannel`` before it
    are stored, so those cannot wait for the checkpoint to take them along: waiting would hold
    every step for the whole delay (the built-in agent's ``messages``, 20 ms a step). Here the
    delay is far longer than the run may take: the run ends in time only if the delta writes
    go at once. The rest (``joined``) still rides with its checkpoint."""
    monkeypatch.setattr(task_writes, "LINGER_SECONDS", 60.0)

    async def work(call: dict[str, int]) -> DeltaState:
        return {"done": [call["i"]]}

    graph = fan_out(
        DeltaState,
        runtime.saver,
        fan=lambda _: {},
        work=work,
        join=lambda _: {"joined": True},
        calls=FAN_OUT,
    )
    assert delta_channels(graph) == {"done"}
    assert delta_channels(runtime.graphs["agent"]) == {"messages"}  # the built-in agent's
    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id, **run_configurable(_events(), graph)}}
    final = await asyncio.wait_for(graph.ainvoke({}, config, durability="sync"), 20)
    assert sorted(final["done"]) == list(range(FAN_OUT)) and final["joined"]
    stored = await _writes(runtime, thread_id)
    delta = [w for w in stored if w["channel"] == "done"]
    assert len(delta) == FAN_OUT and all(w["written_in"] != w["next_in"] for w in delta), delta
    joined = [w for w in stored if w["channel"] == "joined"]
    assert joined and all(w["written_in"] == w["next_in"] for w in joined), joined


async def test_the_service_names_its_graphs_delta_channels_so_agent_steps_do_not_wait(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor puts the graph's delta channels in every run's config: a run of the
    built-in agent, served, whose ``messages`` writes waited for the delay (a minute here)
    would take a minute a step; it ends within seconds."""
    monkeypatch.setattr(task_writes, "LINGER_SECONDS", 60.0)
    async with open_service(settings, runtime=runtime) as svc:
        run = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=counter(2), if_not_exists="create"),
        )
        deadline = time.monotonic() + 30
        while (now := await svc.refreshed_run(run["thread_id"], run["run_id"]))["status"] in (
            "pending",
            "running",
        ):
            assert time.monotonic() < deadline, f"the run did not end in 30 s: {now}"
            await asyncio.sleep(0.05)
    assert now["status"] == "success", now


async def test_a_finished_tasks_writes_are_stored_while_a_slow_sibling_still_runs(
    runtime: Any,
) -> None:
    """What a takeover needs to re-run only the unfinished task: the finished ones' writes are
    stored on their own, within the delay, though no checkpoint comes to take them along."""
    slow = asyncio.Event()
    graph = _graph(runtime.saver, slow)
    thread_id = str(uuid.uuid4())
    run = asyncio.create_task(graph.ainvoke({}, _config(thread_id, served=True), durability="sync"))
    try:
        deadline = time.monotonic() + 10
        while True:
            stored = {
                w["task_id"] for w in await _writes(runtime, thread_id) if w["channel"] == "done"
            }
            if len(stored) == FAN_OUT - 1:
                break
            assert time.monotonic() < deadline, f"finished tasks' writes not stored: {stored}"
            await asyncio.sleep(10 * LINGER_SECONDS)
        assert not run.done()
        # Stored alone: no checkpoint follows their step yet.
        work = [w for w in await _writes(runtime, thread_id) if w["channel"] == "done"]
        assert work and all(w["next_in"] is None for w in work), work
    finally:
        slow.set()
    final = await run
    assert sorted(final["done"]) == list(range(FAN_OUT))


async def test_writes_taken_into_a_failed_checkpoint_are_not_stored_and_say_why(
    runtime: Any,
) -> None:
    """A checkpoint whose statement fails (here, as in service, the event log's fence refusing
    events of an attempt that does not hold its run) stores none of the writes it took, and
    the task that saved them gets the error."""
    saver = runtime.saver
    first = await _first_checkpoint(saver)
    thread_id = first["thread_id"]
    not_held = EventRows(str(uuid.uuid4()), 1, [(1, "custom", "{}")])
    config: Any = {"configurable": {**first, **run_configurable(_events(not_held))}}
    write = asyncio.create_task(saver.aput_writes(config, [("done", [7])], "task-1"))
    await asyncio.sleep(0)  # queued, waiting for the checkpoint
    with pytest.raises(Exception, match="no longer held by this attempt"):
        await saver.aput(config, empty_checkpoint(), {"step": 0}, {})
    with pytest.raises(Exception, match="no longer held by this attempt"):
        await asyncio.wait_for(write, 10)
    assert await _writes(runtime, thread_id) == []
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (thread_id,)
        )
        assert (await cur.fetchone())["n"] == 1  # the first checkpoint only


async def test_writes_of_a_checkpoint_cancelled_mid_write_are_reported_stored(
    runtime: Any, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run cancelled while its checkpoint's statement is under way (here waiting for a row
    lock): the statement still completes (``run_to_completion``), and the task that saved
    writes into it is told they are stored, not cancelled."""
    # Taking the lock (a new connection) can outlast the usual delay: the writes would then be
    # stored on their own before the checkpoint starts, and this would test nothing.
    monkeypatch.setattr(task_writes, "LINGER_SECONDS", 30.0)
    saver = runtime.saver
    first = await _first_checkpoint(saver)
    thread_id = first["thread_id"]
    step = empty_checkpoint()
    await saver.aput({"configurable": dict(first)}, step, {"step": 0}, {})  # written again below
    config: Any = {"configurable": {**first, **run_configurable(_events())}}
    write = asyncio.create_task(saver.aput_writes(config, [("done", [7])], "task-1"))
    await asyncio.sleep(0)

    def still_waiting() -> None:
        assert not write.done()

    checkpoint = saver.aput(config, step, {"step": 0}, {})
    await cancel_while_it_waits(database_url, thread_id, step["id"], checkpoint, still_waiting)
    assert await asyncio.wait_for(write, 10) is None
    assert [w["channel"] for w in await _writes(runtime, thread_id)] == ["done"]


async def test_a_checkpoint_waiting_for_a_connection_takes_the_writes_queued_before_it(
    runtime: Any,
) -> None:
    """Under load a checkpoint waits for a slot of the saver's longer than the delay: the writes
    it was handed after still go in its transaction, not in one of their own."""
    saver = runtime.saver
    first = await _first_checkpoint(saver)
    config: Any = {"configurable": {**first, **run_configurable(_events())}}
    held = 0
    while not saver.slots.locked():  # every connection the saver may use is busy
        await saver.slots.acquire()
        held += 1
    try:
        write = asyncio.create_task(saver.aput_writes(config, [("done", [7])], "task-1"))
        await asyncio.sleep(0)
        checkpoint = asyncio.create_task(saver.aput(config, empty_checkpoint(), {"step": 0}, {}))
        await asyncio.sleep(20 * LINGER_SECONDS)
        assert not write.done() and not checkpoint.done()
    finally:
        for _ in range(held):
            saver.slots.release()
    await asyncio.wait_for(asyncio.gather(write, checkpoint), 10)
    [stored] = await _writes(runtime, first["thread_id"])
    assert stored["written_in"] == stored["next_in"]


async def test_writes_a_checkpoint_took_but_could_not_write_are_stored_on_their_own(
    runtime: Any,
) -> None:
    """A checkpoint that fails before its transaction starts (here its events barrier; in
    service, an event log that already failed) does not take the writes down with it."""
    saver = runtime.saver
    first = await _first_checkpoint(saver)

    @asynccontextmanager
    async def broken() -> AsyncIterator[_Step]:
        raise RuntimeError("the event log is gone")
        yield _Step(None)  # pragma: no cover

    config: Any = {"configurable": {**first, **run_configurable(broken)}}
    write = asyncio.create_task(saver.aput_writes(config, [("done", [7])], "task-1"))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="the event log is gone"):
        await saver.aput(config, empty_checkpoint(), {"step": 0}, {})
    assert await asyncio.wait_for(write, 10) is None
    [stored] = await _writes(runtime, first["thread_id"])
    assert stored["channel"] == "done" and stored["next_in"] is None
