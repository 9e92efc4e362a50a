"""Thread bodies as the SDK sends them: ``supersteps`` start a thread's state, ``extract`` picks
values out of searched threads, ``select`` trims a state and its history; a field this server
does not know is a 422 that names it, in every request body (threads, runs, store, crons,
assistants), never ignored."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from tests.api.conftest import one_graph_project
from tests.utils.runs import sdk_client
from tests.utils.server import ServerProcess

NOTES_GRAPH = textwrap.dedent(
    '''
    """Two nodes that add to a list of notes: ``write`` then ``review``."""
    import operator
    from typing import Annotated, TypedDict

    from langgraph.graph import END, START, StateGraph


    class State(TypedDict, total=False):
        notes: Annotated[list[str], operator.add]
        topic: str


    builder = StateGraph(State)
    builder.add_node("write", lambda state: {"notes": ["written"]})
    builder.add_node("review", lambda state: {"notes": ["reviewed"]})
    builder.add_edge(START, "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", END)
    graph = builder.compile()
    '''
)


@pytest.fixture(scope="module")
def notes_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("notes")
    with one_graph_project(module_database_url, root, "notes", "notes.py", NOTES_GRAPH) as proc:
        yield proc


async def test_supersteps_give_a_new_thread_its_state_as_bulk_update_state_does(
    notes_server: ServerProcess,
) -> None:
    async with sdk_client(notes_server.url) as client:
        thread = await client.threads.create(
            graph_id="notes",
            supersteps=[
                {"updates": [{"values": {"topic": "tides", "notes": ["a"]}, "as_node": "write"}]},
                {"updates": [{"values": {"notes": ["b"]}, "as_node": "review"}]},
            ],
        )
        assert thread["metadata"]["graph_id"] == "notes"
        assert thread["values"] == {"topic": "tides", "notes": ["a", "b"]}
        state = await client.threads.get_state(thread["thread_id"])
        assert state["values"] == {"topic": "tides", "notes": ["a", "b"]}
        assert state["next"] == []  # written as review, the graph's last node
        history = await client.threads.get_history(thread["thread_id"])
        assert [h["metadata"]["source"] for h in history] == ["update", "update"]
        # The thread runs on from that state.
        done = await client.runs.wait(thread["thread_id"], "notes", input={"topic": "next"})
        assert done == {"topic": "next", "notes": ["a", "b", "written", "reviewed"]}


async def test_supersteps_without_a_graph_or_with_a_bad_node_are_refused(
    notes_server: ServerProcess,
) -> None:
    async with sdk_client(notes_server.url) as client:
        thread_id = str(uuid.uuid4())
        with pytest.raises(UnprocessableEntityError, match=r"metadata\.graph_id"):
            await client.threads.create(
                thread_id=thread_id,
                supersteps=[{"updates": [{"values": {"topic": "x"}, "as_node": "write"}]}],
            )
        assert await client.threads.search(ids=[thread_id]) == []  # nothing created
        with pytest.raises(UnprocessableEntityError, match="supersteps were refused"):
            await client.threads.create(
                graph_id="notes",
                supersteps=[{"updates": [{"values": {"topic": "x"}, "as_node": "nowhere"}]}],
            )


async def test_supersteps_are_checked_as_the_graphs_state_updates_are(
    notes_server: ServerProcess,
) -> None:
    """The built-in agent takes only messages, written as its agent, in a state update: so too
    in a new thread's supersteps (no control field, no tool node, no resume of an approval)."""
    async with sdk_client(notes_server.url) as client:
        hostile = [
            (
                {"values": {"messages": [], "pending_calls": [{"name": "x"}]}, "as_node": "agent"},
                "cannot write",
            ),
            ({"values": {"messages": []}, "as_node": "tools"}, "is not allowed for the agent"),
            (
                {"values": None, "command": {"resume": {"decisions": []}}, "as_node": "agent"},
                "not commands",
            ),
        ]
        for update, said in hostile:
            thread_id = str(uuid.uuid4())
            with pytest.raises(UnprocessableEntityError, match=said):
                await client.threads.create(
                    thread_id=thread_id, graph_id="agent", supersteps=[{"updates": [update]}]
                )
            assert await client.threads.search(ids=[thread_id]) == []
        made = await client.threads.create(
            graph_id="agent",
            supersteps=[
                {
                    "updates": [
                        {
                            "values": {"messages": [{"role": "user", "content": "hi"}]},
                            "as_node": "agent",
                        }
                    ]
                }
            ],
        )
        assert made["values"]["messages"][0]["content"] == "hi"


async def test_extract_picks_values_out_of_each_thread(notes_server: ServerProcess) -> None:
    async with sdk_client(notes_server.url) as client:
        thread = await client.threads.create(metadata={"team": "tides", "owner": {"n": 1}})
        await client.runs.wait(thread["thread_id"], "notes", input={"topic": "moon"})
        found = await client.threads.search(
            ids=[thread["thread_id"]],
            extract={
                "last": "values.notes[-1]",
                "first": "values.notes[0]",
                "team": "metadata.team",
                "deep": "metadata.owner.n",
                "missing": "values.notes[7]",
            },
        )
        assert found[0]["extracted"] == {
            "last": "reviewed",
            "first": "written",
            "team": "tides",
            "deep": 1,
            "missing": None,
        }
        assert found[0]["values"]["topic"] == "moon"  # without select: every field
        trimmed = await client.threads.search(
            ids=[thread["thread_id"]], select=["thread_id"], extract={"topic": "values.topic"}
        )
        assert trimmed == [{"thread_id": thread["thread_id"], "extracted": {"topic": "moon"}}]


@pytest.mark.parametrize(
    ("extract", "said"),
    [
        ({"values": "values.topic"}, "not a thread field"),
        ({"bad alias": "values.topic"}, "identifier"),
        ({"x": "config.configurable"}, "must start with values, metadata, interrupts"),
        ({"x": "values..topic"}, ".key or [index]"),
        ({f"a{i}": "values.topic" for i in range(11)}, "at most 10 paths"),
    ],
)
async def test_a_bad_extract_is_a_422_that_says_what_is_wrong(
    notes_server: ServerProcess, extract: dict[str, str], said: str
) -> None:
    async with httpx.AsyncClient(base_url=notes_server.url) as http:
        answer = await http.post("/threads/search", json={"extract": extract})
    assert answer.status_code == 422
    assert said in answer.text


async def test_select_trims_a_state_and_its_history(notes_server: ServerProcess) -> None:
    async with sdk_client(notes_server.url) as client:
        thread = await client.threads.create()
        await client.runs.wait(thread["thread_id"], "notes", input={"topic": "sun"})
        state = await client.threads.get_state(thread["thread_id"])
        assert set(state) >= {"values", "next", "tasks", "checkpoint", "metadata"}
        at = state["checkpoint"]
        picked = await client.threads.get_state(
            thread["thread_id"], checkpoint=at, select=["values.topic", "next"]
        )
        assert picked == {"values": {"topic": "sun"}, "next": []}
        by_id = await client.threads.get_state(
            thread["thread_id"], checkpoint_id=at["checkpoint_id"], select=["checkpoint"]
        )
        assert by_id == {"checkpoint": at}
        history = await client.threads.get_history(
            thread["thread_id"], limit=2, select=["values.notes"]
        )
        assert history == [
            {"values": {"notes": ["written", "reviewed"]}},
            {"values": {"notes": ["written"]}},
        ]
    async with httpx.AsyncClient(base_url=notes_server.url) as http:
        answer = await http.get(
            f"/threads/{thread['thread_id']}/state", params={"select": ["values.topic"]}
        )
        assert answer.json() == {"values": {"topic": "sun"}}
        wrong = await http.get(f"/threads/{thread['thread_id']}/state", params={"select": "vals"})
        assert wrong.status_code == 422


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/threads", {"metadata": {}, "metdata": {"a": 1}}, "metdata"),
        ("POST", "/threads/search", {"limit": 5, "statuss": "idle"}, "statuss"),
        ("POST", "/threads/count", {"value": {}}, "value"),
        ("POST", "/threads/prune", {"thread_ids": ["t"], "keep": 1}, "keep"),
        ("POST", "/runs/cancel", {"status": "all", "wait": True}, "wait"),
        ("POST", "/threads/search", {"ids": [], "supersteps": []}, "supersteps"),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": {}, "tl": 1}, "tl"),
        ("POST", "/store/items/search", {"namespace_prefix": ["a"], "querry": "x"}, "querry"),
        ("POST", "/store/namespaces", {"prefix": ["a"], "depth": 2}, "depth"),
        ("POST", "/runs/crons/search", {"limit": 5, "status": "on"}, "status"),
        ("POST", "/runs/crons/count", {"graph_id": "notes"}, "graph_id"),
        (
            "POST",
            "/runs/crons",
            {"assistant_id": "notes", "schedule": "* * * * *", "after_seconds": 5},
            "after_seconds",
        ),
        ("POST", "/assistants/search", {"graph": "notes"}, "graph"),
        (
            "POST",
            "/runs/crons",
            {"assistant_id": "notes", "schedule": "* * * * *", "durability": "exit"},
            "'exit' is not supported",
        ),
        (
            "POST",
            "/runs/crons",
            {"assistant_id": "notes", "schedule": "* * * * *", "checkpoint_during": False},
            "checkpoint_during false",
        ),
    ],
)
async def test_an_unknown_body_field_is_a_422_that_names_it(
    notes_server: ServerProcess, method: str, path: str, body: dict[str, object], field: str
) -> None:
    async with httpx.AsyncClient(base_url=notes_server.url) as http:
        answer = await http.request(method, path, json=body)
    assert answer.status_code == 422, answer.text
    assert field in answer.text


async def test_unknown_fields_of_a_threads_own_bodies_are_422(notes_server: ServerProcess) -> None:
    async with sdk_client(notes_server.url) as client:
        thread = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread, "notes", input={"topic": "x"})
    cases = [
        ("PATCH", f"/threads/{thread}", {"metadata": {}, "tags": ["a"]}, "tags"),
        ("POST", f"/threads/{thread}/history", {"limit": 1, "after": "x"}, "after"),
        ("POST", f"/threads/{thread}/state", {"values": {}, "as_nodes": "write"}, "as_nodes"),
        (
            "POST",
            f"/threads/{thread}/state/checkpoint",
            {"checkpoint": {"checkpoint_id": "x", "ns": ""}},
            "ns",
        ),
        (
            "POST",
            f"/threads/{thread}/runs",
            {"assistant_id": "notes", "command": {"resume": 1, "gotoo": "x"}},
            "gotoo",
        ),
    ]
    async with httpx.AsyncClient(base_url=notes_server.url) as http:
        for method, path, body, field in cases:
            answer = await http.request(method, path, json=body)
            assert answer.status_code == 422, (path, answer.text)
            assert field in answer.text, (path, answer.text)
