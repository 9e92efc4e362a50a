"""A subgraph's step is stored with its events: when the checkpoint of a subgraph's step is
durable, so are the ``updates|<namespace>`` (and ``values|<namespace>``) that step sent.

LangGraph hands a subgraph's chunks to the root's stream a few event-loop turns after the step,
while the step's checkpoint is written at once; threadline's checkpointer waits for them
(``api.durable.stream_modes.caught_up``). Were they stored after the checkpoint, a kill in between
would lose them for good (the checkpointed step never runs again; seen in
``test_project_supervisor_team``). Here the subgraph's next step reads the run's event log as it
starts, after the checkpoint before it committed: deterministic, no kill needed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from tests.api.conftest import one_graph_project
from tests.utils.runs import sdk_client
from tests.utils.server import ServerProcess

GRAPH = textwrap.dedent(
    '''
    """A parent whose ``child`` subgraph's second step reads what the run's log holds."""
    import operator
    import os
    from typing import Annotated, TypedDict

    import psycopg
    from langgraph.graph import END, START, StateGraph


    class State(TypedDict, total=False):
        log: Annotated[list[str], operator.add]
        stored: list[str]


    def second(state: State, config) -> State:
        run_id = config["metadata"]["run_id"]
        with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
            rows = conn.execute(
                "SELECT event FROM run_events WHERE run_id = %s ORDER BY seq", (run_id,)
            ).fetchall()
        return {"log": ["second"], "stored": [event for (event,) in rows]}


    child = StateGraph(State)
    child.add_node("first", lambda state: {"log": ["first"]})
    child.add_node("second", second)
    child.add_edge(START, "first")
    child.add_edge("first", "second")
    child.add_edge("second", END)

    parent = StateGraph(State)
    parent.add_node("start", lambda state: {"log": ["start"]})
    parent.add_node("child", child.compile())
    parent.add_edge(START, "start")
    parent.add_edge("start", "child")
    parent.add_edge("child", END)
    graph = parent.compile()
    '''
)


@pytest.fixture(scope="module")
def nested_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("stored")
    with one_graph_project(module_database_url, root, "stored", "stored.py", GRAPH) as proc:
        yield proc


@pytest.mark.parametrize("modes", [["updates"], ["updates", "values"]])
async def test_a_subgraph_steps_events_are_stored_with_its_checkpoint(
    nested_server: ServerProcess, modes: list[str]
) -> None:
    async with sdk_client(nested_server.url) as client:
        thread = (await client.threads.create())["thread_id"]
        parts = [
            (part.event, part.data)
            async for part in client.runs.stream(
                thread, "stored", input={"log": []}, stream_mode=modes, stream_subgraphs=True
            )
        ]
        state = await client.threads.get_state(thread)
    [first] = [e for e, d in parts if e.startswith("updates|child:") and "first" in d]
    namespace = first.split("|", 1)[1]
    stored = state["values"]["stored"]
    # When ``second`` started, ``first``'s checkpoint was committed: its update with it.
    assert f"updates|{namespace}" in stored, stored
    assert "updates" in stored  # the parent's ``start``, too
    if "values" in modes:
        assert stored.count(f"values|{namespace}") == 2, stored  # the input's and first's
