"""A task cut off after part of its writes is not finished: on resume it runs again.

LangGraph saves a cancelled or failed task's writes so far with its error (``PregelRunner.commit``)
and reads any task with an output write as finished (``langgraph.pregel._task_status``). A node's
update written before its conditional edge ran, with the edge's write lost, would then end the
graph on the next attempt with the rest of its work undone: the false ``success`` of a run whose
attempt was cut by a database crash. The saver stores a task's writes all or nothing
(``api.durable.saver.whole_task_writes``).
"""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from api.durable.saver import PooledSaver
from api.engine.runtime import Runtime
from tests.utils.served import served_config


class State(TypedDict, total=False):
    done: Annotated[list[str], operator.add]
    joined: bool


class Faults:
    """``work`` 0 fails once, as a tool fails when the database goes away, while ``work`` 1 is
    between its update and its edge: LangGraph cancels it there (``_should_stop_others``)."""

    def __init__(self) -> None:
        self.routing = asyncio.Event()
        self.fail = True


def _graph(saver: PooledSaver, faults: Faults) -> Any:
    """``fan`` sends two ``work`` tasks; the edge after ``work`` 1 leads to ``join``, the one
    after ``work`` 0 to the end: only ``work`` 1's edge write makes ``join`` run."""

    async def work(call: dict[str, int]) -> State:
        if call["i"] == 0:
            await faults.routing.wait()
            if faults.fail:
                faults.fail = False
                raise ConnectionError("the database went away")
        return {"done": [f"work {call['i']}"]}

    async def route(state: State) -> str:
        if state["done"][-1] == "work 0":
            return END
        if faults.fail:  # the first attempt: cancelled here when its sibling fails
            faults.routing.set()
            await asyncio.sleep(30)
        return "join"

    g = StateGraph(State)
    g.add_node("work", work)  # type: ignore[call-overload]
    g.add_node("join", lambda _: {"joined": True})
    g.add_conditional_edges(START, lambda _: [Send("work", {"i": i}) for i in range(2)], ["work"])
    g.add_conditional_edges("work", route, ["join", END])
    g.add_edge("join", END)
    return g.compile(checkpointer=saver)


async def _cut_then_resume(runtime: Runtime, *, served: bool) -> dict[str, Any]:
    faults = Faults()
    graph = _graph(runtime.saver, faults)
    config = served_config(str(uuid.uuid4()), served=served)
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(graph.ainvoke({"done": []}, config, durability="sync"), 10)
    await runtime.saver.release(config["configurable"]["thread_id"])

    pending = await graph.aget_state(config)
    assert [t.name for t in pending.tasks if t.result is None] == ["work", "work"], (
        "both tasks were cut before their end: neither may count as finished"
    )

    result: dict[str, Any] = await asyncio.wait_for(graph.ainvoke(None, config), 40)
    return result


async def test_a_task_cut_between_its_update_and_its_edge_runs_again_on_resume(
    runtime: Runtime,
) -> None:
    result = await _cut_then_resume(runtime, served=True)
    assert sorted(result["done"]) == ["work 0", "work 1"]
    assert result.get("joined") is True, "the graph ended with the work after work 1 undone"


async def test_the_same_holds_for_a_graph_used_outside_a_run(runtime: Runtime) -> None:
    result = await _cut_then_resume(runtime, served=False)
    assert sorted(result["done"]) == ["work 0", "work 1"]
    assert result.get("joined") is True, "the graph ended with the work after work 1 undone"
