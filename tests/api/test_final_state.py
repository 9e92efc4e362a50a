"""The state a run ends with, from its own ``checkpoints`` stream (``api.engine.final_state``):
equal to what ``aget_state`` reads when the graph reached its end, without reading it; read as
before when the graph stopped at an interrupt or a breakpoint; and the ``checkpoints`` chunks it
watches reach the stream only when the run asked for them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from api.engine.final_state import Finished, LastCheckpoint


class Counted:
    """The graph, counting its ``aget_state`` calls."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.reads = 0

    async def aget_state(self, config: Any) -> Any:
        self.reads += 1
        return await self.graph.aget_state(config)


def graph(ask: bool) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        answer = interrupt({"question": "go on?"}) if ask else "no question"
        return {"messages": [{"role": "ai", "content": f"answered {answer}"}]}

    def child(state: MessagesState) -> dict[str, Any]:
        return {"messages": [{"role": "ai", "content": "from the child"}]}

    sub = StateGraph(MessagesState)
    sub.add_node("child", child)
    sub.add_edge(START, "child")
    g = StateGraph(MessagesState)
    g.add_node("sub", sub.compile())
    g.add_node("agent", agent)
    g.add_edge(START, "sub")
    g.add_edge("sub", "agent")
    g.add_edge("agent", END)
    return g.compile(checkpointer=InMemorySaver())


async def attempt(compiled: Any, modes: list[str], subgraphs: bool) -> tuple[Any, list[str], Any]:
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
    watch = LastCheckpoint(modes)
    passed = []
    async for item in compiled.astream(
        {"messages": [{"role": "user", "content": "hi"}]},
        config,
        stream_mode=watch.stream_modes(),
        subgraphs=subgraphs,
    ):
        ns = item[0] if subgraphs else ()
        mode, chunk = item[-2:]
        if watch.passes(mode, ns, chunk):
            passed.append(mode)
    counted = Counted(compiled)
    return await watch.state(counted, config), passed, (counted, config)


@pytest.mark.parametrize("subgraphs", [False, True])
async def test_an_ended_graph_s_state_comes_from_its_stream(subgraphs: bool) -> None:
    compiled = graph(ask=False)
    state, passed, (counted, config) = await attempt(compiled, ["updates"], subgraphs)
    assert isinstance(state, Finished) and counted.reads == 0
    read = await compiled.aget_state(config)
    assert state.values == read.values and len(read.values["messages"]) == 3
    assert (
        state.config["configurable"]["checkpoint_id"]
        == read.config["configurable"]["checkpoint_id"]
    )
    assert not state.next and not state.interrupts and not state.tasks
    assert "checkpoints" not in passed and "updates" in passed


async def test_an_interrupted_graph_s_state_is_read() -> None:
    compiled = graph(ask=True)
    state, _, (counted, _) = await attempt(compiled, ["updates"], False)
    assert not isinstance(state, Finished) and counted.reads == 1
    assert state.next == ("agent",) and state.interrupts[0].value == {"question": "go on?"}


async def test_checkpoints_reach_the_stream_when_asked() -> None:
    state, passed, _ = await attempt(graph(ask=False), ["checkpoints", "updates"], False)
    assert isinstance(state, Finished)
    assert passed.count("checkpoints") == 4  # input, sub, agent, the end
