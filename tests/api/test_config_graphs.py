"""A team's own LangGraph graph, served from a ``langgraph.json``: listed, streamed,
interrupted and resumed through the same endpoints as the built-in agent."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.runs.assistant_config import default_assistant_id
from tests.api.conftest import FAST
from tests.utils.runs import read_events, wait_status
from tests.utils.server import ServerProcess, ServerStartError, serving
from tests.utils.sse import SSEEvent

MY_GRAPH = textwrap.dedent(
    '''
    """A two-node graph that asks a human before it publishes."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt


    class State(TypedDict, total=False):
        topic: str
        draft: str
        verdict: str


    def write(state: State) -> State:
        return {"draft": f"A note about {state['topic']}."}


    def review(state: State) -> State:
        answer = interrupt({"question": "Publish this draft?", "draft": state["draft"]})
        return {"verdict": f"{answer}: {state['draft']}"}


    builder = StateGraph(State)
    builder.add_node("write", write)
    builder.add_node("review", review)
    builder.add_edge(START, "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", END)
    '''
)


def write_config(directory: Path, graphs: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "my_graph.py").write_text(MY_GRAPH)
    config = directory / "langgraph.json"
    config.write_text(json.dumps({"graphs": graphs}))
    return config


@pytest.fixture(scope="module")
def graph_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("graphs")
    config = write_config(root / "project", {"mine": "./my_graph.py:builder"})
    proc = ServerProcess(module_database_url, root / "data", config=config, name="graphs", **FAST)
    with serving(proc):
        yield proc


@pytest.fixture
async def http(graph_server: ServerProcess) -> Any:
    async with httpx.AsyncClient(base_url=graph_server.url, timeout=30) as client:
        yield client


async def stream(http: httpx.AsyncClient, tid: str, body: dict[str, Any]) -> list[SSEEvent]:
    async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
        assert response.status_code == 200, await response.aread()
        return await read_events(response)


async def test_info_lists_the_builtin_and_the_configured_graph(http: httpx.AsyncClient) -> None:
    info = (await http.get("/info")).json()
    assert info["assistants"] == ["agent", "mine"]
    assistants = (await http.post("/assistants/search", json={})).json()
    # Each served graph's default assistant, its id derived from the graph's as LangGraph does.
    assert sorted((a["graph_id"], a["assistant_id"]) for a in assistants) == [
        (graph_id, default_assistant_id(graph_id)) for graph_id in ("agent", "mine")
    ]
    assert (await http.get("/assistants/mine")).json()["graph_id"] == "mine"


async def test_own_graph_streams_interrupts_and_resumes(http: httpx.AsyncClient) -> None:
    tid = (await http.post("/threads", json={})).json()["thread_id"]
    events = await stream(
        http,
        tid,
        {
            "assistant_id": "mine",
            "input": {"topic": "otters"},
            "stream_mode": ["values", "updates"],
        },
    )
    kinds = [e.event for e in events]
    assert kinds[0] == "metadata" and kinds[-1] == "end"
    assert events[-1].data["status"] == "success"  # paused: as on LangGraph
    updates = [e.data for e in events if e.event == "updates"]
    assert {"write": {"draft": "A note about otters."}} in updates
    interrupts = [u["__interrupt__"] for u in updates if "__interrupt__" in u]
    assert len(interrupts) == 1
    pending = interrupts[0][0]
    assert pending["value"] == {"question": "Publish this draft?", "draft": "A note about otters."}
    values = [e.data for e in events if e.event == "values"]
    assert values[0] == {"topic": "otters"}
    # LangGraph's last values chunk of an interrupted run also carries the interrupt.
    last = {k: v for k, v in values[-1].items() if k != "__interrupt__"}
    assert last == {"topic": "otters", "draft": "A note about otters."}
    ids = [int(e.id) for e in events if e.id]
    assert ids == list(range(1, len(ids) + 1))

    thread = (await http.get(f"/threads/{tid}")).json()
    assert thread["status"] == "interrupted"
    state = (await http.get(f"/threads/{tid}/state")).json()
    assert state["next"] == ["review"]
    assert [i["id"] for i in state["interrupts"]] == [pending["id"]]

    resumed = await stream(
        http,
        tid,
        {"assistant_id": "mine", "command": {"resume": "yes"}, "stream_mode": ["updates"]},
    )
    assert resumed[0].data["attempt"] == 1
    assert resumed[-1].event == "end" and resumed[-1].data["status"] == "success"
    assert {"review": {"verdict": "yes: A note about otters."}} in [
        e.data for e in resumed if e.event == "updates"
    ]
    assert "values" not in {e.event for e in resumed}  # only the modes this run asked for

    state = (await http.get(f"/threads/{tid}/state")).json()
    assert state["next"] == [] and state["interrupts"] == []
    assert state["values"]["verdict"] == "yes: A note about otters."
    assert (await http.get(f"/threads/{tid}")).json()["status"] == "idle"
    history = (await http.post(f"/threads/{tid}/history", json={"limit": 20})).json()
    assert len(history) >= 4
    assert history[0]["values"] == state["values"]

    # Resuming again: nothing is pending now.
    again = await http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "mine", "command": {"resume": "again"}}
    )
    assert again.status_code == 409, again.text


async def test_wait_on_own_graph(http: httpx.AsyncClient) -> None:
    tid = (await http.post("/threads", json={})).json()["thread_id"]
    first = await http.post(
        f"/threads/{tid}/runs/wait", json={"assistant_id": "mine", "input": {"topic": "moss"}}
    )
    assert first.status_code == 200
    body = first.json()
    assert body["draft"] == "A note about moss."
    [pending] = body["__interrupt__"]
    done = await http.post(
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": "mine", "command": {"resume": {pending["id"]: "no"}}},
    )
    assert done.status_code == 200, done.text
    assert done.json()["verdict"] == "no: A note about moss."


def test_a_config_that_shadows_the_builtin_agent_fails_fast(
    tmp_path: Path,
    database_url: str,
    make_server: Callable[..., ServerProcess],
) -> None:
    config = write_config(tmp_path / "project", {"agent": "./my_graph.py:builder"})
    proc = make_server(database_url, tmp_path / "data", config=config, startup_timeout=30)
    with pytest.raises(ServerStartError, match="built-in agent"):
        proc.start()
    assert not proc.running


STEPS_GRAPH = textwrap.dedent(
    '''
    """Three slow steps, each noting its run in a file: what a kill must not make run twice."""
    import os
    import time
    from pathlib import Path
    from typing import Annotated, TypedDict
    import operator

    from langgraph.graph import END, START, StateGraph

    LOG = Path(os.environ["STEPS_LOG"])


    class State(TypedDict, total=False):
        done: Annotated[list[str], operator.add]


    def step(name):
        def run(state: State) -> State:
            time.sleep(1.0)
            with LOG.open("a") as out:
                out.write(name + "\\n")
            return {"done": [name]}
        return run


    builder = StateGraph(State)
    for name in ("one", "two", "three"):
        builder.add_node(name, step(name))
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", "three")
    builder.add_edge("three", END)
    '''
)


async def test_own_graph_survives_a_kill_mid_run(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """A graph unrelated to the built-in agent, killed mid-run: another server takes the run
    over from its last checkpoint; no finished step runs again and the run ends ``success``."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "steps.py").write_text(STEPS_GRAPH)
    config = project / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"steps": "./steps.py:builder"}}))
    log = tmp_path / "steps.log"
    env = {"STEPS_LOG": str(log)}
    first = make_server(database_url, tmp_path / "data", config=config, env=env, name="steps-1")
    first.start()
    async with httpx.AsyncClient(base_url=first.url, timeout=30) as http:
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        res = await http.post(
            f"/threads/{tid}/runs", json={"assistant_id": "steps", "input": {"done": []}}
        )
        run_id = res.json()["run_id"]
        for _ in range(200):  # until the first step is done: its result saved
            # (Not its line in the log: a kill between the line and the step's save runs the
            # step again, as it would on LangGraph's own server; a tool makes that safe with
            # an idempotency key, as the built-in agent's do.)
            state = (await http.get(f"/threads/{tid}/state")).json()
            if state["values"].get("done"):
                break
            await asyncio.sleep(0.05)
        assert state["values"]["done"] == ["one"], state
    first.kill()
    second = make_server(database_url, tmp_path / "data", config=config, env=env, name="steps-2")
    second.start()
    async with httpx.AsyncClient(base_url=second.url, timeout=30) as http:
        ended = await wait_status(http, tid, run_id, ("success", "error"), timeout=60)
        values = (await http.get(f"/threads/{tid}/state")).json()["values"]
    assert ended["status"] == "success", ended
    assert ended["attempt"] == 2
    assert values == {"done": ["one", "two", "three"]}
    ran = log.read_text().splitlines()
    # A step the kill interrupted may run again (it had not finished); a finished one never.
    assert ran[0] == "one" and ran.count("one") == 1, ran
    assert ran[-2:] == ["two", "three"] or ran[-3:] == ["two", "two", "three"], ran
