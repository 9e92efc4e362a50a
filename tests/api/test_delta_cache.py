"""The values of a thread's ``DeltaChannel`` at its latest checkpoint, kept by the process that
ended its last run (``api.durable.delta_cache``): the next run and a state read are served from
them (counted as hits on ``/metrics``) and see exactly the thread's messages; a thread that moved
on elsewhere (a state update, a run on another replica) is read from storage (a miss) and is
right too; ``THREADLINE_DELTA_CACHE_ITEMS=0`` keeps nothing. And the cache on its own: what it
serves, when it does not, and what it drops first."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from api.durable.delta_cache import DeltaCache
from tests.utils.server import ServerProcess

GRAPH = """
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph

from agent.message_batches import add_messages_batch


class State(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch, snapshot_frequency=100)]


def reply(state: State) -> dict[str, Any]:
    seen = [m.content for m in state["messages"]]
    return {"messages": [AIMessage(content=f"seen {len(seen)}: {seen[-1]}")]}


builder = StateGraph(State)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)
graph = builder
"""


def project(root: Path) -> Path:
    (root / "project").mkdir(parents=True, exist_ok=True)
    (root / "project" / "chat.py").write_text(GRAPH)
    config = root / "project" / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"chat": "./chat.py:graph"}}))
    return config


async def hits(http: httpx.AsyncClient) -> dict[str, float]:
    text = (await http.get("/metrics")).text
    found = {"hit": 0.0, "miss": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "threadline_delta_cache_reads_total":
                found[sample.labels["result"]] = sample.value
    return found


async def say(http: httpx.AsyncClient, thread_id: str, text: str) -> list[str]:
    body = {"assistant_id": "chat", "input": {"messages": [{"role": "user", "content": text}]}}
    response = await http.post(f"/threads/{thread_id}/runs/wait", json=body)
    assert response.status_code == 200, response.text
    return [m["content"] for m in response.json()["messages"]]


def conversation(*turns: str) -> list[str]:
    """The messages after these user turns: each answered with what the node saw."""
    out: list[str] = []
    for turn in turns:
        out.append(turn)
        out.append(f"seen {len(out)}: {turn}")
    return out


async def test_runs_and_reads_are_served_from_the_kept_values_and_stay_right(
    database_url: str, tmp_path: Path, make_server: Callable[..., ServerProcess]
) -> None:
    config = project(tmp_path)
    a = make_server(database_url, tmp_path / "data", config=config, name="a")
    b = make_server(database_url, tmp_path / "data", config=config, name="b")
    a.start()
    b.start()
    async with (
        httpx.AsyncClient(base_url=a.url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.url, timeout=60) as on_b,
    ):
        tid = (await on_a.post("/threads", json={})).json()["thread_id"]
        turns = [f"turn {i}" for i in range(5)]
        for i, turn in enumerate(turns):
            assert await say(on_a, tid, turn) == conversation(*turns[: i + 1])
        before = await hits(on_a)
        assert before["hit"] >= 4  # every run after the first started from the kept values
        # The current state is the thread's stored values (api.store.kept_state): no read of the
        # checkpoint. Read at that checkpoint, it is the kept delta values.
        state = (await on_a.get(f"/threads/{tid}/state")).json()
        assert [m["content"] for m in state["values"]["messages"]] == conversation(*turns)
        assert (await hits(on_a))["hit"] == before["hit"]
        at = state["checkpoint"]["checkpoint_id"]
        loaded = (await on_a.get(f"/threads/{tid}/state/{at}")).json()
        assert loaded["values"] == state["values"]
        assert (await hits(on_a))["hit"] == before["hit"] + 1

        # Another replica moves the thread on: A's kept values name an older checkpoint.
        turns.append("from b")
        assert await say(on_b, tid, "from b") == conversation(*turns)
        missed = (await hits(on_a))["miss"]
        turns.append("back on a")
        assert await say(on_a, tid, "back on a") == conversation(*turns)
        assert (await hits(on_a))["miss"] > missed

        # A state update makes a new checkpoint: the next run reads it, and is right.
        update = {"values": {"messages": [{"role": "user", "content": "edited in"}]}}
        assert (await on_a.post(f"/threads/{tid}/state", json=update)).status_code == 200
        got = await say(on_a, tid, "after the edit")
        assert got[-3:] == ["edited in", "after the edit", f"seen {len(got) - 1}: after the edit"]
        state = (await on_a.get(f"/threads/{tid}/state")).json()
        assert [m["content"] for m in state["values"]["messages"]] == got


async def test_nothing_is_kept_at_zero(
    database_url: str, tmp_path: Path, make_server: Callable[..., ServerProcess]
) -> None:
    env = {"THREADLINE_DELTA_CACHE_ITEMS": "0"}
    server = make_server(database_url, tmp_path / "data", config=project(tmp_path), env=env)
    server.start()
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        for i in range(3):
            assert await say(http, tid, f"t{i}") == conversation(*[f"t{j}" for j in range(i + 1)])
        counted = await hits(http)
        assert counted["hit"] == 0 and counted["miss"] >= 2


def test_the_cache_serves_only_the_checkpoint_it_kept() -> None:
    cache = DeltaCache(max_items=10)
    kept = ["a", "b"]
    cache.remember("t1", "c1", {"messages": kept})
    served = cache.history("t1", "c1", ["messages"])
    assert served == {"messages": {"writes": [], "seed": ["a", "b"]}}
    served["messages"]["seed"].append("x")  # a reader's list is its own
    assert kept == ["a", "b"]
    assert cache.history("t1", "c0", ["messages"]) is None  # another checkpoint
    assert cache.history("t2", "c1", ["messages"]) is None  # another thread
    assert cache.history("t1", "c1", ["messages", "other"]) is None  # a channel it lacks
    cache.remember("t1", "c2", {"messages": ["a", "b", "c"]})  # the thread moved on
    assert cache.history("t1", "c1", ["messages"]) is None
    assert cache.items == 3


def test_the_cache_drops_the_threads_used_longest_ago() -> None:
    cache = DeltaCache(max_items=10)
    for name in ("t1", "t2", "t3"):
        cache.remember(name, "c", {"messages": list(range(4))})
    assert set(cache.entries) == {"t2", "t3"} and cache.items == 8
    assert cache.history("t2", "c", ["messages"]) is not None  # t2 used: t3 is older now
    cache.remember("t4", "c", {"messages": list(range(4))})
    assert set(cache.entries) == {"t2", "t4"}
    cache.remember("big", "c", {"messages": list(range(11))})  # more than it may hold
    assert "big" not in cache.entries and cache.items == 8
    cache.forget("t2")
    assert set(cache.entries) == {"t4"} and cache.items == 4
