"""What ``useStream`` and agent-chat-ui send, accepted as LangGraph Server accepts it: JSON labelled
``text/plain`` or not labelled, ``input: {}`` beside a command, ``checkpoint`` on run create
(regenerate, edit a message), ``graph_id`` in thread metadata, ``GET /threads/{id}/stream``."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest

from api.runs.assistant_config import default_assistant_id
from tests.utils.runs import new_thread, read_events, wait_status
from tests.utils.tasks import greet


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def run_to_end(http: httpx.AsyncClient, tid: str, body: dict[str, Any]) -> dict[str, Any]:
    res = await http.post(f"/threads/{tid}/runs", json={"assistant_id": "agent", **body})
    assert res.status_code == 200, res.text
    return await wait_status(http, tid, res.json()["run_id"], ("success", "interrupted", "error"))


async def human_texts(http: httpx.AsyncClient, tid: str) -> list[str]:
    state = (await http.get(f"/threads/{tid}/state")).json()
    return [m["content"] for m in state["values"]["messages"] if m["type"] == "human"]


async def history(http: httpx.AsyncClient, tid: str) -> list[dict[str, Any]]:
    res = await http.post(f"/threads/{tid}/history", json={"limit": 100})
    assert res.status_code == 200, res.text
    return list(res.json())


@pytest.mark.parametrize("content_type", ["text/plain;charset=UTF-8", None])
async def test_json_labelled_text_plain_or_not_labelled_is_taken_as_json(
    http: httpx.AsyncClient, content_type: str | None
) -> None:
    """agent-chat-ui's ``/api`` proxy forwards the SDK's bodies as ``text/plain``."""
    headers = {"content-type": content_type} if content_type else {}
    tid = str(uuid.uuid4())
    body = json.dumps({"thread_id": tid, "metadata": {"from": "ui"}}).encode()
    created = await http.post("/threads", content=body, headers=headers)
    assert created.status_code == 200, created.text
    found = await http.post(
        "/threads/search", content=json.dumps({"metadata": {"from": "ui"}}), headers=headers
    )
    assert found.status_code == 200, found.text
    assert tid in [t["thread_id"] for t in found.json()]
    run = await http.post(
        f"/threads/{tid}/runs",
        content=json.dumps({"assistant_id": "agent", "input": user("hi")}),
        headers=headers,
    )
    assert run.status_code == 200, run.text


async def test_a_body_that_is_not_json_is_still_refused_whatever_its_label(
    http: httpx.AsyncClient,
) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        res = await http.post(
            "/threads", content=b"thread_id=x", headers={"content-type": content_type}
        )
        assert res.status_code == 422, res.text
        assert "JSON" in res.json()["detail"]


async def test_a_thread_names_the_graph_of_its_runs_in_its_metadata(
    http: httpx.AsyncClient,
) -> None:
    tid = await new_thread(http, metadata={"title": "mine"})
    await run_to_end(http, tid, {"input": user("hello")})
    thread = (await http.get(f"/threads/{tid}")).json()
    # As LangGraph Server labels it: the graph, and the assistant (the graph's default here).
    agent = default_assistant_id("agent")
    assert thread["metadata"] == {"title": "mine", "graph_id": "agent", "assistant_id": agent}
    listed = await http.post("/threads/search", json={"metadata": {"graph_id": "agent"}})
    assert tid in [t["thread_id"] for t in listed.json()]
    # A thread created by the run itself is labelled too.
    other = str(uuid.uuid4())
    await run_to_end(http, other, {"input": user("hello"), "if_not_exists": "create"})
    assert (await http.get(f"/threads/{other}")).json()["metadata"]["graph_id"] == "agent"


async def test_an_empty_input_beside_a_command_is_no_input(http: httpx.AsyncClient) -> None:
    """What agent-chat-ui's approval form sends: ``input: {}`` with ``command.resume``."""
    tid = await new_thread(http)
    asked = await run_to_end(http, tid, {"input": greet()})
    assert asked["status"] == "success"  # paused: as on LangGraph
    assert (await http.get(f"/threads/{tid}")).json()["status"] == "interrupted"
    state = (await http.get(f"/threads/{tid}/state")).json()
    checkpoint = state["checkpoint"]
    resumed = await run_to_end(
        http,
        tid,
        {
            "input": {},
            "command": {"resume": {"decisions": [{"type": "approve"}]}},
            "checkpoint": checkpoint,  # the latest: the same as none
        },
    )
    assert resumed["status"] == "success", resumed
    values = (await http.get(f"/threads/{tid}/state")).json()["values"]
    assert values["status"] == "verified"
    # Anything else beside a command is still refused.
    both = await http.post(
        f"/threads/{tid}/runs",
        json={"assistant_id": "agent", "input": user("x"), "command": {"resume": "y"}},
    )
    assert both.status_code == 422 and "not both" in both.text


async def test_a_resume_from_an_older_checkpoint_is_refused(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    await run_to_end(http, tid, {"input": greet()})
    oldest = (await history(http, tid))[-1]["checkpoint"]
    res = await http.post(
        f"/threads/{tid}/runs",
        json={
            "assistant_id": "agent",
            "command": {"resume": {"decisions": [{"type": "approve"}]}},
            "checkpoint": oldest,
        },
    )
    assert res.status_code == 409, res.text
    assert "latest checkpoint" in res.json()["detail"]
    # Nothing was answered: the approval is still pending.
    assert (await http.get(f"/threads/{tid}/state")).json()["interrupts"]


async def test_regenerate_and_edit_a_message_fork_from_a_checkpoint(
    http: httpx.AsyncClient,
) -> None:
    tid = await new_thread(http)
    await run_to_end(http, tid, {"input": user("first")})
    second = await run_to_end(http, tid, {"input": user("second")})
    assert await human_texts(http, tid) == ["first", "second"]
    checkpoints = await history(http, tid)
    # Where the second question was written (its input checkpoint) and just before it.
    second_input = next(
        c
        for c in checkpoints
        if c["metadata"].get("run_id") == second["run_id"] and c["metadata"]["source"] == "input"
    )
    before_second = second_input["parent_checkpoint"]
    # Regenerate: the same question answered again from where it was asked.
    regenerated = await run_to_end(
        http, tid, {"input": None, "checkpoint": second_input["checkpoint"]}
    )
    assert regenerated["status"] == "success", regenerated
    assert await human_texts(http, tid) == ["first", "second"]
    latest = (await history(http, tid))[0]
    assert latest["metadata"]["run_id"] == regenerated["run_id"]
    # Edit the second message: a new branch from before it.
    edited = await run_to_end(
        http,
        tid,
        {"input": user("second, edited"), "checkpoint_id": before_second["checkpoint_id"]},
    )
    assert edited["status"] == "success", edited
    assert await human_texts(http, tid) == ["first", "second, edited"]


async def test_a_checkpoint_of_another_thread_or_none_is_refused(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    await run_to_end(http, tid, {"input": user("first")})
    mine = (await history(http, tid))[0]["checkpoint"]
    other = await new_thread(http)
    unknown = await http.post(
        f"/threads/{other}/runs",
        json={"assistant_id": "agent", "input": None, "checkpoint_id": mine["checkpoint_id"]},
    )
    assert unknown.status_code == 404, unknown.text
    assert "history lists its checkpoints" in unknown.json()["detail"]
    elsewhere = await http.post(
        f"/threads/{other}/runs",
        json={"assistant_id": "agent", "input": None, "checkpoint": mine},
    )
    assert elsewhere.status_code == 422, elsewhere.text


async def test_join_the_thread_stream_of_its_active_run(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    idle = await http.get(f"/threads/{tid}/stream")
    assert idle.status_code == 200
    assert await read_events(idle, timeout=10) == []
    res = await http.post(
        f"/threads/{tid}/runs",
        json={
            "assistant_id": "agent",
            "input": {"task": {"name": "counter", "params": {"n": 2, "delay": 0.3}}},
            "stream_mode": ["updates", "custom"],
        },
    )
    run_id = res.json()["run_id"]
    await asyncio.sleep(0.3)
    async with http.stream("GET", f"/threads/{tid}/stream") as joined:
        assert joined.headers["location"] == f"/threads/{tid}/runs/{run_id}/stream"
        events = await read_events(joined)
    names = [e.event for e in events]
    assert names[0] == "metadata" and names[-1] == "end"
    assert "updates" in names
    # Resumed after an event it saw: only what came after.
    seen = events[2].id
    async with http.stream(
        "GET", f"/threads/{tid}/runs/{run_id}/stream", headers={"Last-Event-ID": str(seen)}
    ) as again:
        rest = await read_events(again)
    assert [e.id for e in rest] == [e.id for e in events[3:]]


def blocks(text: str) -> dict[str, Any]:
    """A message as agent-chat-ui sends it: content as text blocks."""
    return {"messages": [{"type": "human", "content": [{"type": "text", "text": text}]}]}


async def test_a_task_message_starts_a_catalog_task_from_a_chat(http: httpx.AsyncClient) -> None:
    """Chat front ends send only messages: ``/task NAME {params}`` starts that task, its check
    and rules from the catalog, as a ``{"task": ...}`` input does."""
    tid = await new_thread(http)
    run = await run_to_end(http, tid, {"input": blocks('/task greet {"name": "Ada"}')})
    assert run["status"] == "success", run  # paused: as on LangGraph
    state = (await http.get(f"/threads/{tid}/state")).json()
    assert state["values"]["task"]["name"] == "greet"
    assert state["values"]["task"]["check"]  # the catalog's acceptance check
    [interrupt] = state["interrupts"]
    assert [a["name"] for a in interrupt["value"]["action_requests"]] == ["write_file"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("/task no_such_task", "unknown task 'no_such_task'"),
        ('/task greet {"name": 3}', "name"),
        ('/task greet {"name": }', "/task"),
    ],
)
async def test_a_bad_task_message_is_a_422(http: httpx.AsyncClient, text: str, says: str) -> None:
    tid = await new_thread(http)
    res = await http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "agent", "input": blocks(text)}
    )
    assert res.status_code == 422, res.text
    assert says in res.json()["detail"]
