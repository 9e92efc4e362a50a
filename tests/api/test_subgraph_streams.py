"""``stream_subgraphs``: a subgraph's events reach the client named with their namespace
(``updates|child:<task id>``), as LangGraph Server names them, and are stored like the graph's
own: a replay from the first event gives the same stream, and an interrupt inside the subgraph
is answered by a resume."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import one_graph_project
from tests.utils.runs import sdk_client
from tests.utils.server import ServerProcess

NESTED_GRAPH = textwrap.dedent(
    '''
    """A parent whose ``child`` node is a compiled subgraph that reports progress and asks."""
    import operator
    from typing import Annotated, TypedDict

    from langgraph.config import get_stream_writer
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt


    class State(TypedDict, total=False):
        log: Annotated[list[str], operator.add]


    def plan(state: State) -> State:
        get_stream_writer()({"progress": "planned"})
        return {"log": ["plan"]}


    def ask(state: State) -> State:
        answer = interrupt({"question": "go on?"})
        return {"log": [f"answer {answer}"]}


    child = StateGraph(State)
    child.add_node("plan", plan)
    child.add_node("ask", ask)
    child.add_edge(START, "plan")
    child.add_edge("plan", "ask")
    child.add_edge("ask", END)

    parent = StateGraph(State)
    parent.add_node("start", lambda state: {"log": ["start"]})
    parent.add_node("child", child.compile())
    parent.add_node("finish", lambda state: {"log": ["finish"]})
    parent.add_edge(START, "start")
    parent.add_edge("start", "child")
    parent.add_edge("child", "finish")
    parent.add_edge("finish", END)
    graph = parent.compile()
    '''
)


@pytest.fixture(scope="module")
def nested_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("nested")
    with one_graph_project(module_database_url, root, "nested", "nested.py", NESTED_GRAPH) as proc:
        yield proc


def _named(parts: list[Any]) -> list[tuple[str, Any]]:
    return [(p.event, p.data) for p in parts if p.event != "metadata"]


async def test_a_subgraphs_events_come_with_their_namespace_and_replay_the_same(
    nested_server: ServerProcess,
) -> None:
    async with sdk_client(nested_server.url) as client:
        thread = (await client.threads.create())["thread_id"]
        live = [
            part
            async for part in client.runs.stream(
                thread,
                "nested",
                input={"log": []},
                stream_mode=["updates", "custom"],
                stream_subgraphs=True,
            )
        ]
        events = _named(live)
        names = [name for name, _ in events]
        child = [n for n in names if n.startswith("updates|child:")]
        assert child, names
        namespace = child[0].split("|", 1)[1]
        assert ("custom|" + namespace, {"progress": "planned"}) in events
        assert ("updates|" + namespace, {"plan": {"log": ["plan"]}}) in events
        assert ("updates", {"start": {"log": ["start"]}}) in events
        interrupts = [d for n, d in events if n == "updates" and "__interrupt__" in d]
        assert interrupts and interrupts[0]["__interrupt__"][0]["value"] == {"question": "go on?"}

        runs = await client.runs.list(thread)
        replay = [
            part
            async for part in client.runs.join_stream(thread, runs[0]["run_id"], last_event_id="-1")
        ]
        assert _named(replay)[: len(events)] == events

        # The paused subgraph's own state, as LangGraph Server shows it.
        paused = await client.threads.get_state(thread, subgraphs=True)
        assert paused["next"] == ["child"]
        [task] = paused["tasks"]
        assert task["name"] == "child" and task["state"]["next"] == ["ask"]
        assert task["state"]["values"]["log"] == ["start", "plan"]
        assert task["state"]["tasks"][0]["interrupts"][0]["value"] == {"question": "go on?"}
        assert (await client.threads.get_state(thread))["tasks"][0]["state"] is None

        # Without stream_subgraphs only the parent's events are sent, as on LangGraph Server.
        resumed = [
            part
            async for part in client.runs.stream(
                thread, "nested", command={"resume": "yes"}, stream_mode=["updates"]
            )
        ]
        assert all("|" not in p.event for p in resumed), [p.event for p in resumed]
        state = await client.threads.get_state(thread)
        log = state["values"]["log"]
        assert "answer yes" in log and log[-1] == "finish", log
