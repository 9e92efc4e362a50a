"""Assistants and thread state as LangGraph Server serves them, driven by the official SDK (and
plain HTTP for what a hostile client sends): assistant search/count/graph/schemas, thread count,
search by ids with sorting, history filters, the state at a checkpoint, state updates and copies.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from api.runs.assistant_config import default_assistant_id
from tests.api.test_auth import headers_for
from tests.utils.keys import create_key
from tests.utils.tasks import counter

COUNTER = counter(2, 0)
AGENT = default_assistant_id("agent")


async def finished_thread(client: Any, **metadata: Any) -> str:
    thread = await client.threads.create(metadata=metadata)
    tid: str = thread["thread_id"]
    await asyncio.wait_for(client.runs.wait(tid, "agent", input=COUNTER), timeout=60)
    return tid


async def test_assistants_search_count_and_shape(client: Any, http: httpx.AsyncClient) -> None:
    found = await client.assistants.search(graph_id="agent", limit=5)
    assert [a["assistant_id"] for a in found] == [AGENT]  # the graph's default
    a = found[0]
    assert a["version"] == 1 and a["description"] is None and a["context"] == {}
    # Named as LangGraph Server names a default: the compiled graph's own name.
    assert a["metadata"] == {"created_by": "system"} and a["name"] == "threadline-agent"
    assert a["created_at"] and a["updated_at"]
    assert await client.assistants.search(metadata={"x": 1}) == []
    assert await client.assistants.search(offset=5) == []
    assert len(await client.assistants.search(sort_by="name", sort_order="asc")) >= 1
    assert await client.assistants.count() >= 1
    # A graph that is not served is a 404 naming those that are, as on LangGraph Server.
    for call in (
        client.assistants.search(graph_id="nope"),
        client.assistants.count(graph_id="nope"),
    ):
        with pytest.raises(NotFoundError, match="agent"):
            await call
    picked = await client.assistants.search(select=["assistant_id", "version"])
    assert picked[0] == {"assistant_id": AGENT, "version": 1}
    got = await client.assistants.get("agent")
    assert got == await client.assistants.get(AGENT)
    assert got["version"] == 1 and got["created_at"] == a["created_at"]
    # Hostile input: a 422 that names the field, never a 500.
    for body in ({"sort_by": "secret"}, {"sort_order": "up"}, {"limit": 0}, {"offset": -1}):
        res = await http.post("/assistants/search", json=body)
        assert res.status_code == 422, (body, res.text)
        assert res.json()["detail"]
    assert (await http.post("/assistants/search")).status_code == 200  # no body at all


async def test_assistant_graph_and_schemas(client: Any, http: httpx.AsyncClient) -> None:
    graph = await client.assistants.get_graph("agent")
    ids = {n["id"] for n in graph["nodes"]}
    assert {"__start__", "agent", "tools", "verify"} <= ids
    assert graph["edges"]
    assert (await client.assistants.get_graph("agent", xray=True))["nodes"]
    schemas = await client.assistants.get_schemas("agent")
    assert schemas["graph_id"] == "agent"
    for key in ("input_schema", "output_schema", "state_schema", "config_schema"):
        assert key in schemas
    assert "messages" in schemas["state_schema"]["properties"]
    assert await client.assistants.get_subgraphs("agent") == {}
    with pytest.raises(NotFoundError):
        await client.assistants.get_schemas("nope")
    assert (await http.get("/assistants/agent/graph", params={"xray": "lots"})).status_code == 422


async def test_thread_count_and_search_ids_sorting(client: Any, http: httpx.AsyncClient) -> None:
    tag = uuid.uuid4().hex
    made = [(await client.threads.create(metadata={"tag": tag}))["thread_id"] for _ in range(3)]
    assert await client.threads.count(metadata={"tag": tag}) == 3
    assert await client.threads.count(metadata={"tag": tag}, status="busy") == 0
    two = await client.threads.search(ids=made[:2], limit=10)
    assert {t["thread_id"] for t in two} == set(made[:2])
    asc = await client.threads.search(metadata={"tag": tag}, sort_by="thread_id", sort_order="asc")
    assert [t["thread_id"] for t in asc] == sorted(made)
    desc = await client.threads.search(metadata={"tag": tag}, sort_by="created_at")
    assert [t["thread_id"] for t in desc] == made[::-1]
    oldest = await client.threads.search(
        metadata={"tag": tag}, sort_by="created_at", sort_order="asc"
    )
    assert [t["thread_id"] for t in oldest] == made
    for body in (
        {"sort_by": "owner"},
        {"sort_by": "created_at; drop table threads"},
        {"sort_order": "sideways"},
        {"ids": ["bad id!"]},
        {"ids": "not-a-list"},
    ):
        res = await http.post("/threads/search", json=body)
        assert res.status_code == 422, (body, res.text)
    assert (await http.post("/threads/count", json={"status": "nope"})).status_code == 422
    assert (await http.post("/threads/count")).status_code == 200


async def test_history_filters_and_state_at_a_checkpoint(client: Any) -> None:
    tid = await finished_thread(client)
    history = await client.threads.get_history(tid, limit=100)
    assert len(history) > 2
    inputs = await client.threads.get_history(tid, metadata={"source": "input"})
    assert inputs and all(h["metadata"]["source"] == "input" for h in inputs)
    old = history[-2]
    cid = old["checkpoint"]["checkpoint_id"]
    only = await client.threads.get_history(tid, checkpoint={"checkpoint_id": cid})
    assert [h["checkpoint"]["checkpoint_id"] for h in only] == [cid]
    at = await client.threads.get_state(tid, checkpoint_id=cid)
    assert at["checkpoint"]["checkpoint_id"] == cid and at["values"] == old["values"]
    posted = await client.threads.get_state(tid, checkpoint={"checkpoint_id": cid})
    assert posted["checkpoint"]["checkpoint_id"] == cid
    with pytest.raises(NotFoundError):
        await client.threads.get_state(tid, checkpoint_id="1f0-not-a-checkpoint")
    with pytest.raises(NotFoundError):
        await client.threads.get_state(tid, checkpoint={"checkpoint_id": "nope"})


async def test_update_state_writes_messages_only(client: Any, http: httpx.AsyncClient) -> None:
    tid = await finished_thread(client)
    before = await client.threads.get_state(tid)
    n = len(before["values"]["messages"])
    out = await client.threads.update_state(
        tid, {"messages": [{"role": "user", "content": "a note from the client"}]}
    )
    cid = out["checkpoint"]["checkpoint_id"]
    assert cid and out["checkpoint"]["thread_id"] == tid
    after = await client.threads.get_state(tid)
    assert after["checkpoint"]["checkpoint_id"] == cid
    assert len(after["values"]["messages"]) == n + 1
    assert after["values"]["messages"][-1]["content"] == "a note from the client"
    assert after["metadata"]["source"] == "update"
    assert after["values"]["status"] == before["values"]["status"]
    # Forking from an older checkpoint: the latest becomes the fork.
    old = before["parent_checkpoint"]["checkpoint_id"]
    fork = await client.threads.update_state(
        tid, {"messages": [{"role": "user", "content": "fork"}]}, checkpoint_id=old
    )
    forked = await client.threads.get_state(tid)
    assert forked["checkpoint"]["checkpoint_id"] == fork["checkpoint"]["checkpoint_id"]
    assert forked["parent_checkpoint"]["checkpoint_id"] == old
    # The agent's control fields and its other nodes are not the client's to write.
    for body in (
        {"values": {"status": "verified"}},
        {"values": {"messages": [], "verdict": {"passed": True}}},
        {"values": {"messages": [{"role": "user", "content": "x"}]}, "as_node": "tools"},
        {"values": {"messages": [{"role": "user", "content": "x"}]}, "as_node": "verify"},
        {"values": None},
        {"values": "text"},
        {"values": {"messages": [{"role": "nobody", "content": 1}]}},
    ):
        res = await http.post(f"/threads/{tid}/state", json=body)
        assert res.status_code == 422, (body, res.text)
        assert res.json()["detail"]
    res = await http.post(
        f"/threads/{tid}/state",
        json={"values": {"messages": []}, "checkpoint": {"checkpoint_id": "nope"}},
    )
    assert res.status_code == 404, res.text
    with pytest.raises(NotFoundError):
        await client.threads.update_state(str(uuid.uuid4()), {"messages": []})


async def test_update_state_while_a_run_is_active_is_a_conflict(client: Any) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "agent", input=counter(3, 5))
    with pytest.raises(ConflictError):
        await client.threads.update_state(tid, {"messages": [{"role": "user", "content": "x"}]})
    with pytest.raises(ConflictError):
        await client.threads.copy(tid)
    await client.runs.cancel(tid, run["run_id"], wait=True)


async def test_copy_thread(client: Any, http: httpx.AsyncClient) -> None:
    tag = uuid.uuid4().hex
    tid = await finished_thread(client, tag=tag)
    copy = await client.threads.copy(tid)
    new = copy["thread_id"]
    assert new != tid and copy["metadata"]["tag"] == tag
    assert copy["status"] == "idle"
    src, dst = await client.threads.get_state(tid), await client.threads.get_state(new)
    assert dst["values"] == src["values"]
    assert dst["checkpoint"]["checkpoint_id"] == src["checkpoint"]["checkpoint_id"]
    assert dst["checkpoint"]["thread_id"] == new
    assert len(await client.threads.get_history(new, limit=100)) == len(
        await client.threads.get_history(tid, limit=100)
    )
    files = (await http.get(f"/threads/{new}/workspace")).json()["files"]
    assert "counter.txt" in {f["path"] for f in files}
    # The copy goes on by itself; the source is unchanged.
    await asyncio.wait_for(client.runs.wait(new, "agent", input=COUNTER), timeout=60)
    assert len(await client.threads.get_history(new, limit=100)) > len(
        await client.threads.get_history(tid, limit=100)
    )
    with pytest.raises(NotFoundError):
        await client.threads.copy(str(uuid.uuid4()))
    with pytest.raises(UnprocessableEntityError):
        await client.threads.get_history(tid, limit=0)


async def test_another_tenants_thread_is_not_found(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    proc = make_server(database_url, data, env={"THREADLINE_AUTH": "keys"}, name="state-keys")
    proc.start()
    alice_key = await asyncio.to_thread(create_key, data, database_url, "alice")
    bob_key = await asyncio.to_thread(create_key, data, database_url, "bob")
    alice = httpx.AsyncClient(base_url=proc.url, headers=headers_for(alice_key), timeout=60)
    bob = httpx.AsyncClient(base_url=proc.url, headers=headers_for(bob_key), timeout=60)
    async with alice, bob:
        tid = (await alice.post("/threads", json={"metadata": {"who": "alice"}})).json()[
            "thread_id"
        ]
        res = await alice.post(
            f"/threads/{tid}/runs/wait", json={"assistant_id": "agent", "input": COUNTER}
        )
        assert res.status_code == 200, res.text
        cid = (await alice.get(f"/threads/{tid}/state")).json()["checkpoint"]["checkpoint_id"]
        for method, path, body in [
            ("GET", f"/threads/{tid}/state/{cid}", None),
            ("POST", f"/threads/{tid}/state/checkpoint", {"checkpoint": {"checkpoint_id": cid}}),
            ("POST", f"/threads/{tid}/state", {"values": {"messages": []}}),
            ("POST", f"/threads/{tid}/copy", None),
            ("POST", f"/threads/{tid}/history", {"metadata": {"source": "loop"}}),
        ]:
            res = await bob.request(method, path, json=body)
            assert res.status_code == 404, (method, path, res.text)
        assert (await bob.post("/threads/count", json={})).json() == 0
        assert (await bob.post("/threads/search", json={"ids": [tid]})).json() == []
        assert (await alice.post("/threads/count", json={})).json() == 1
        copy = (await alice.post(f"/threads/{tid}/copy")).json()
        assert (await bob.get(f"/threads/{copy['thread_id']}")).status_code == 404
        assert (await alice.post("/threads/count", json={})).json() == 2
        assert (await bob.get("/assistants/agent/schemas")).status_code == 200
