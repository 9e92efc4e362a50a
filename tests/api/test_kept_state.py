"""``GET /threads/{id}/state`` (and the first entry of a history page from the latest) answers
from the thread's stored values while they are its latest checkpoint's
(``api.store.kept_state``), and from the checkpoint otherwise: the two answers are the same,
whichever way a thread got where it is.

Each case compares the answer with the state at the same checkpoint read from the checkpoint
(``POST /threads/{id}/state/checkpoint``, which always loads it) and says which way the answer
came: the thread's row names its latest checkpoint (``kept``) or not. A graph with a stock
``add_messages`` list and one with a ``DeltaChannel`` list are each checked.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.api.conftest import FAST
from tests.utils.server import ServerProcess, serving

GRAPHS_PY = textwrap.dedent(
    """
    from typing import Annotated, Any, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage
    from langgraph.channels import DeltaChannel
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.types import interrupt

    from agent.state import add_messages_batch


    class Stock(TypedDict, total=False):
        messages: Annotated[list[AnyMessage], add_messages]
        mode: str
        score: float


    class Delta(TypedDict, total=False):
        messages: Annotated[
            list[AnyMessage], DeltaChannel(add_messages_batch, snapshot_frequency=2)
        ]
        mode: str
        score: float


    def build(schema: Any) -> Any:
        def reply(state: Any) -> Any:
            mode = state.get("mode", "plain")
            n = len(state["messages"])
            if mode == "ask":
                answer = interrupt({"question": "go on?", "seen": n})
                return {"messages": [AIMessage(f"asked {answer} {n}")]}
            if mode == "fail":
                raise RuntimeError("the node failed")
            if mode == "nul":
                return {"messages": [AIMessage(f"a NUL \\x00 in {n}")]}
            extra = {"tool_calls": [], "usage_metadata": None}
            return {"messages": [AIMessage(f"reply {n}", **extra)], "score": n / 3}

        def check(state: Any) -> Any:
            return {"messages": [AIMessage(f"checked {len(state['messages'])}")]}

        g = StateGraph(schema)
        g.add_node("reply", reply)
        g.add_node("check", check)
        g.add_edge(START, "reply")
        g.add_edge("reply", "check")
        g.add_edge("check", END)
        return g.compile()


    stock = build(Stock)
    delta = build(Delta)
    """
)
GRAPHS = ("stock", "delta")


@pytest.fixture(scope="module")
def kept_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("kept")
    (root / "project").mkdir()
    (root / "project" / "graphs.py").write_text(GRAPHS_PY)
    config = root / "project" / "langgraph.json"
    config.write_text(json.dumps({"graphs": {g: f"./graphs.py:{g}" for g in GRAPHS}}))
    proc = ServerProcess(module_database_url, root / "data", config=config, name="kept", **FAST)
    with serving(proc):
        yield proc


@pytest.fixture
async def http(kept_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=kept_server.url, timeout=60) as c:
        yield c


class Thread:
    def __init__(self, http: httpx.AsyncClient, db: str, graph: str, thread_id: str) -> None:
        self.http, self.db, self.graph, self.id = http, db, graph, thread_id

    async def run(self, mode: str = "plain", **body: Any) -> str:
        payload: dict[str, Any] = {"assistant_id": self.graph, **body}
        if "command" not in body:
            payload["input"] = {"messages": [{"role": "user", "content": mode}], "mode": mode}
        r = await self.http.post(f"/threads/{self.id}/runs/wait", json=payload)
        assert r.status_code == 200, r.text
        runs = (await self.http.get(f"/threads/{self.id}/runs")).json()
        return str(runs[0]["status"])

    def kept(self) -> bool:
        """Whether the thread's row names its latest root checkpoint."""
        with psycopg.connect(self.db) as conn:
            row = conn.execute(
                "SELECT t.state_checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints c"
                " WHERE c.thread_id = t.thread_id AND c.checkpoint_ns = '')"
                " FROM threads t WHERE t.thread_id = %s",
                (self.id,),
            ).fetchone()
        return bool(row and row[0])

    async def same_both_ways(self, **params: Any) -> dict[str, Any]:
        """The state answer, checked equal to the state at its checkpoint read from it."""
        r = await self.http.get(f"/threads/{self.id}/state", params=params)
        assert r.status_code == 200, r.text
        answer = r.json()
        at = answer["checkpoint"]
        body = {"checkpoint": {"checkpoint_id": at["checkpoint_id"]}, **params}
        loaded = await self.http.post(f"/threads/{self.id}/state/checkpoint", json=body)
        assert loaded.status_code == 200, loaded.text
        assert answer == loaded.json()
        # A history page from the latest starts with the same answer; the rest is the page
        # before that checkpoint (read from the checkpoints either way).
        page = (await self.http.post(f"/threads/{self.id}/history", json={"limit": 3})).json()
        before = {"limit": 2, "before": at["checkpoint_id"]}
        rest = (await self.http.post(f"/threads/{self.id}/history", json=before)).json()
        assert page == [answer, *rest] and len(rest) == 2
        one = (await self.http.post(f"/threads/{self.id}/history", json={"limit": 1})).json()
        assert one == [answer]
        return dict(answer)


@pytest.fixture
async def new_thread(http: httpx.AsyncClient, module_database_url: str) -> Any:
    async def make(graph: str) -> Thread:
        r = await http.post("/threads", json={"metadata": {"graph_id": graph}})
        return Thread(http, module_database_url, graph, r.json()["thread_id"])

    return make


def contents(answer: dict[str, Any]) -> list[str]:
    return [m["content"] for m in answer["values"]["messages"]]


@pytest.mark.parametrize("graph", GRAPHS)
async def test_a_finished_run_is_answered_from_the_kept_values(graph: str, new_thread: Any) -> None:
    t = await new_thread(graph)
    for turn in range(3):
        assert await t.run() == "success"
        assert t.kept()
        answer = await t.same_both_ways()
        assert len(answer["values"]["messages"]) == 3 * (turn + 1)
        assert answer["next"] == [] and answer["tasks"] == [] and answer["interrupts"] == []
        assert answer["parent_checkpoint"] is not None
        assert answer["metadata"]["step"] >= 2
    assert contents(answer)[-2:] == ["reply 7", "checked 8"]
    assert answer["values"]["score"] == 7 / 3
    await t.same_both_ways(subgraphs="true")
    selected = (await t.http.get(f"/threads/{t.id}/state", params={"select": "values"})).json()
    assert selected == {"values": answer["values"]}
    one_key = await t.http.get(f"/threads/{t.id}/state", params={"select": "values.score"})
    assert one_key.json() == {"values": {"score": 7 / 3}}


@pytest.mark.parametrize("graph", GRAPHS)
async def test_every_later_checkpoint_reads_the_checkpoint(graph: str, new_thread: Any) -> None:
    t = await new_thread(graph)
    assert await t.run() == "success" and t.kept()

    # A state update: a new checkpoint the stored values are not.
    r = await t.http.post(
        f"/threads/{t.id}/state",
        json={"values": {"messages": [{"role": "user", "content": "edited"}]}, "as_node": "check"},
    )
    assert r.status_code == 200, r.text
    assert not t.kept()
    assert contents(await t.same_both_ways())[-1] == "edited"

    # A run that pauses: tasks and interrupts, from the checkpoint.
    assert await t.run("ask") == "success"
    assert not t.kept()
    paused = await t.same_both_ways()
    assert paused["next"] == ["reply"] and paused["interrupts"]
    assert await t.run(command={"resume": "yes"}) == "success"
    assert t.kept()
    assert contents(await t.same_both_ways())[-2:] == ["asked yes 5", "checked 6"]

    # A run that fails after the last finished one: its checkpoints are later.
    assert await t.run("fail") == "error"
    assert not t.kept()
    failed = await t.same_both_ways()
    assert failed["next"] == ["reply"] and contents(failed)[-1] == "fail"

    # A copy has the same checkpoints but reads them until its own run ends.
    copied = (await t.http.post(f"/threads/{t.id}/copy")).json()["thread_id"]
    c = type(t)(t.http, t.db, graph, copied)
    assert not c.kept()
    assert (await c.same_both_ways())["values"] == (await t.same_both_ways())["values"]
    assert await c.run() == "success" and c.kept()

    # Values a state answer writes otherwise than they are stored (a NUL): not kept.
    assert await t.run("nul") == "success"
    assert not t.kept()
    assert "\x00" in contents(await t.same_both_ways())[-2]


async def test_the_answer_is_the_kept_values_while_they_name_the_latest(
    new_thread: Any, module_database_url: str
) -> None:
    """The way the answer is read: values put in the row are answered while the row names the
    latest checkpoint, and not once it names another."""
    t = await new_thread("stock")
    assert await t.run() == "success" and t.kept()
    with psycopg.connect(module_database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE threads SET state_values = '{\"marker\": true}' WHERE thread_id = %s", (t.id,)
        )
        marked = (await t.http.get(f"/threads/{t.id}/state")).json()
        assert marked["values"] == {"marker": True}
        conn.execute(
            "UPDATE threads SET state_checkpoint_id = 'another' WHERE thread_id = %s", (t.id,)
        )
    answer = await t.same_both_ways()
    assert contents(answer) == ["plain", "reply 1", "checked 2"]
