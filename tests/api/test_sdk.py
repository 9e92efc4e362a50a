"""The official ``langgraph-sdk`` client drives a real server unchanged.

One server process for the module, on its own fresh database, with short leases.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from api.runs.assistant_config import default_assistant_id
from tests.utils.runs import MODES, collect
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet
from tests.utils.workspace import counter_lines

COUNTER = counter(3, 0.05)


def custom_types(parts: list[Any]) -> list[str]:
    return [p.data.get("type") for p in parts if p.event == "custom"]


def update_nodes(parts: list[Any]) -> set[str]:
    return {node for p in parts if p.event == "updates" for node in p.data}


def assert_ids_contiguous(parts: list[Any]) -> None:
    ids = [int(p.id) for p in parts]
    assert ids == list(range(ids[0], ids[0] + len(ids))), ids


async def test_stream_counter_event_sequence(client: Any, server: ServerProcess) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    parts = await collect(client.runs.stream(tid, "agent", input=COUNTER, stream_mode=MODES))

    first, last = parts[0], parts[-1]
    assert first.event == "metadata"
    assert first.data["attempt"] == 1
    run_id = first.data["run_id"]
    uuid.UUID(run_id)
    assert [p.event for p in parts].count("metadata") == 1
    types = custom_types(parts)
    assert {"step", "tool_started", "tool_finished", "verify"} <= set(types)
    assert types.count("tool_started") == types.count("tool_finished") == 3
    assert {"agent", "tools", "verify"} <= update_nodes(parts)
    assert last.event == "end"
    assert last.data == {"run_id": run_id, "status": "success"}
    assert [p.event for p in parts].count("end") == 1
    assert int(first.id) == 1
    assert_ids_contiguous(parts)
    assert sorted(counter_lines(server.data_dir, tid)) == ["1", "2", "3"]


async def test_create_then_join_stream(client: Any) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "agent", input=COUNTER, stream_mode=MODES)
    assert run["status"] in ("pending", "running")
    parts = await collect(client.runs.join_stream(tid, run["run_id"]))
    assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"]
    assert parts[-1].event == "end" and parts[-1].data["status"] == "success"
    assert int(parts[0].id) == 1
    assert_ids_contiguous(parts)
    assert custom_types(parts).count("tool_finished") == 3
    # Joining again after the end replays the run, to the same end.
    again = await collect(client.runs.join_stream(tid, run["run_id"]))
    assert [(p.id, p.event) for p in again] == [(p.id, p.event) for p in parts]


async def test_wait_state_and_history(client: Any) -> None:
    tid = (await client.threads.create())["thread_id"]
    values = await asyncio.wait_for(client.runs.wait(tid, "agent", input=COUNTER), timeout=60)
    assert values["status"] == "verified"
    assert values["verdict"]["passed"] is True

    state = await client.threads.get_state(tid)
    assert state["values"]["status"] == "verified"
    assert state["next"] == []
    assert state["interrupts"] == []
    assert state["checkpoint"]["checkpoint_id"]

    history = await client.threads.get_history(tid, limit=50)
    assert len(history) >= 5
    assert history[0]["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    steps = [h["metadata"]["step"] for h in history]
    assert steps == sorted(steps, reverse=True), steps
    assert history[-1]["values"].get("status") in (None, "running")

    thread = await client.threads.get(tid)
    assert thread["status"] == "idle"


async def test_cancel_running_run(client: Any) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "agent", input=counter(3, 30), stream_mode=MODES)
    parts: list[Any] = []

    async def follow() -> None:
        async for part in client.runs.join_stream(tid, run["run_id"]):
            parts.append(part)
            if part.event == "custom" and part.data.get("type") == "tool_started":
                assert (await client.threads.get(tid))["status"] == "busy"
                await client.runs.cancel(tid, run["run_id"])

    await asyncio.wait_for(follow(), timeout=30)
    assert parts[-1].event == "end"
    assert parts[-1].data["status"] == "interrupted"
    assert "tool_finished" not in custom_types(parts)
    got = await client.runs.get(tid, run["run_id"])
    assert got["status"] == "interrupted"
    assert (await client.threads.get(tid))["status"] == "idle"
    # A finished run cannot be cancelled again.
    with pytest.raises(ConflictError):
        await client.runs.cancel(tid, run["run_id"])


async def test_search_threads_by_status_and_metadata(client: Any) -> None:
    tag = uuid.uuid4().hex
    done = await client.threads.create(metadata={"tag": tag, "kind": "done"})
    fresh = await client.threads.create(metadata={"tag": tag, "kind": "fresh"})
    await asyncio.wait_for(client.runs.wait(done["thread_id"], "agent", input=COUNTER), 60)

    tagged = await client.threads.search(metadata={"tag": tag}, limit=100)
    assert {t["thread_id"] for t in tagged} == {done["thread_id"], fresh["thread_id"]}
    only_done = await client.threads.search(metadata={"tag": tag, "kind": "done"})
    assert [t["thread_id"] for t in only_done] == [done["thread_id"]]
    assert only_done[0]["values"]["status"] == "verified"

    idle = await client.threads.search(status="idle", limit=1000)
    assert done["thread_id"] in {t["thread_id"] for t in idle}
    assert all(t["status"] == "idle" for t in idle)
    busy = await client.threads.search(status="busy", metadata={"tag": tag})
    assert busy == []

    # ``select``: only the fields asked for (a thread list without the heavy ``values``).
    slim = await client.threads.search(metadata={"tag": tag}, select=["thread_id", "status"])
    assert sorted(slim, key=lambda t: t["thread_id"]) == sorted(
        ({"thread_id": t["thread_id"], "status": t["status"]} for t in tagged),
        key=lambda t: t["thread_id"],
    )


async def test_runs_list_and_get(client: Any) -> None:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "agent", input=COUNTER, stream_mode=MODES)
    await collect(client.runs.join_stream(tid, first["run_id"]))
    second = await client.runs.create(
        tid,
        "agent",
        input=counter(1),
        metadata={"which": "second"},
    )
    await asyncio.wait_for(client.runs.join(tid, second["run_id"]), 60)

    listed = await client.runs.list(tid)
    assert [r["run_id"] for r in listed] == [second["run_id"], first["run_id"]]
    got = await client.runs.get(tid, first["run_id"])
    assert got["status"] == "success"
    assert got["assistant_id"] == default_assistant_id("agent")  # the graph's default
    assert got["thread_id"] == tid
    assert (await client.runs.get(tid, second["run_id"]))["metadata"] == {"which": "second"}
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, str(uuid.uuid4()))


async def test_approval_flow(client: Any, server: ServerProcess) -> None:
    tid = (await client.threads.create())["thread_id"]
    updates = client.runs.stream(tid, "agent", input=greet("SDK"), stream_mode="updates")
    parts = await collect(updates)
    interrupts = [p.data["__interrupt__"] for p in parts if "__interrupt__" in p.data]
    assert len(interrupts) == 1 and len(interrupts[0]) == 1
    pending = interrupts[0][0]
    assert [a["name"] for a in pending["value"]["action_requests"]] == ["write_file"]
    assert pending["value"]["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
    ]
    # Paused at an interrupt: the run ends success, as on LangGraph Server; the thread waits.
    assert parts[-1].event == "end" and parts[-1].data["status"] == "success"
    assert (await client.threads.get(tid))["status"] == "interrupted"

    state = await client.threads.get_state(tid)
    assert [i["id"] for i in state["interrupts"]] == [pending["id"]]
    assert state["next"] == ["review"]  # the review node asks; the tools node runs the answer
    [call_id] = pending["value"]["tool_call_ids"]

    async with httpx.AsyncClient(base_url=server.url) as http:
        before = await http.get(f"/threads/{tid}/workspace/greeting.txt")
        assert before.status_code == 404  # nothing written before the approval

        values = await asyncio.wait_for(
            client.runs.wait(
                tid,
                "agent",
                command={"resume": {pending["id"]: {"decisions": [{"type": "approve"}]}}},
            ),
            60,
        )
        assert values["status"] == "verified"
        assert "__interrupt__" not in values
        assert (await client.threads.get(tid))["status"] == "idle"

        text = await http.get(f"/threads/{tid}/workspace/greeting.txt")
        assert text.status_code == 200
        assert text.text == "Hello, SDK!\n"
        audit = (await http.get(f"/threads/{tid}/audit")).json()
    writes = [a for a in audit if a["kind"] == "tool" and a["tool"] == "write_file"]
    assert len(writes) == 1 and writes[0]["detail"]["ok"] is True
    assert writes[0]["tool_call_id"] == call_id
    decisions = [a for a in audit if a["kind"] == "decision"]
    assert [d["detail"]["interrupt_id"] for d in decisions] == [pending["id"]]

    # The same decision again: applied once, so 409 (runs.wait raises it as a plain
    # HTTPStatusError; ConflictError is one too).
    with pytest.raises(httpx.HTTPStatusError) as err:
        await client.runs.wait(
            tid, "agent", command={"resume": {pending["id"]: {"decisions": [{"type": "approve"}]}}}
        )
    assert err.value.response.status_code == 409
    assert "pending interrupt" in err.value.response.json()["detail"]


async def test_info_and_assistants(client: Any, server: ServerProcess) -> None:
    assistants = await client.assistants.search()
    assert default_assistant_id("agent") in [a["assistant_id"] for a in assistants]
    async with httpx.AsyncClient(base_url=server.url) as http:
        info = (await http.get("/info")).json()
    assert info["database"] == "external"
    assert "offline" in info["model"]
