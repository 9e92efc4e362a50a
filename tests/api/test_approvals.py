"""Human approval over HTTP (DESIGN §7): risky tool calls stop for a decision, resume once.

The official ``langgraph-sdk`` client (and plain ``httpx`` for the approvals endpoint and the
audit log) against one real server for the module; every test uses its own threads.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, UnprocessableEntityError

from eval.harness import ServerProcess, workspace_path

MODES = ["updates", "custom"]
WAIT = 60.0
INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")


def greet(name: str = "Ada") -> dict[str, Any]:
    return {"task": {"name": "greet", "params": {"name": name}}}


NOTES = {"task": {"name": "notes", "params": {"first": "alpha", "second": "beta"}}}


async def collect(stream: Any, timeout: float = WAIT) -> list[Any]:
    async def read() -> list[Any]:
        return [part async for part in stream]

    return await asyncio.wait_for(read(), timeout)


def interrupts_in(parts: list[Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for p in parts:
        if p.event == "updates" and isinstance(p.data, dict) and "__interrupt__" in p.data:
            found.extend(p.data["__interrupt__"])
    return found


def custom_of(parts: list[Any], kind: str) -> list[dict[str, Any]]:
    return [p.data for p in parts if p.event == "custom" and p.data.get("type") == kind]


async def start_interrupted(client: Any, payload: dict[str, Any]) -> tuple[str, list[Any]]:
    """A new thread whose first run stopped for approval; its id and the stream parts."""
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(client.runs.stream(tid, "agent", input=payload, stream_mode=MODES))
    assert parts[-1].event == "end", parts[-1]
    assert parts[-1].data["status"] == "interrupted", parts[-1]
    return tid, parts


async def pending_ids(client: Any, tid: str) -> list[str]:
    state = await client.threads.get_state(tid)
    return [i["id"] for i in state["interrupts"]]


async def audit_rows(http: httpx.AsyncClient, tid: str) -> list[dict[str, Any]]:
    res = await http.get(f"/threads/{tid}/audit")
    assert res.status_code == 200, res.text
    rows: list[dict[str, Any]] = res.json()
    return rows


def tool_rows(rows: list[dict[str, Any]], tool: str = "write_file") -> list[dict[str, Any]]:
    return [r for r in rows if r["kind"] == "tool" and r["tool"] == tool]


def decision_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["kind"] == "decision"]


async def workspace_file(http: httpx.AsyncClient, tid: str, path: str) -> str | None:
    """The file's text through ``GET /threads/{id}/workspace/{path}``; None when absent."""
    listing = await http.get(f"/threads/{tid}/workspace")
    assert listing.status_code == 200, listing.text
    names = {f["path"] for f in listing.json()["files"]}
    res = await http.get(f"/threads/{tid}/workspace/{path}")
    if path not in names:
        assert res.status_code == 404, res.text
        return None
    assert res.status_code == 200, res.text
    return res.text


async def approve_via_endpoint(
    http: httpx.AsyncClient, tid: str, interrupt_id: str, **answer: Any
) -> dict[str, Any]:
    res = await http.post(
        f"/threads/{tid}/approvals", json={"interrupt_id": interrupt_id, **answer}
    )
    assert res.status_code == 200, res.text
    run: dict[str, Any] = res.json()
    return run


async def join(client: Any, tid: str, run_id: str) -> dict[str, Any]:
    values: dict[str, Any] = await asyncio.wait_for(client.runs.join(tid, run_id), WAIT)
    return values


# -- the interrupt, then approve ----------------------------------------------------------------


async def test_greet_stops_for_approval_then_approve_writes_once(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))

    # The stream: an ``updates`` event carrying the interrupt, then ``end``; no tool ran.
    found = interrupts_in(parts)
    assert len(found) == 1, found
    interrupt = found[0]
    assert INTERRUPT_ID.fullmatch(interrupt["id"]), interrupt
    value = interrupt["value"]
    assert value["type"] == "approval"
    assert value["tool"] == "write_file"
    assert value["args"] == {"path": "greeting.txt", "content": "Hello, Ada!\n"}
    assert value["tool_call_id"]
    assert "ask" in value["reason"]
    at = next(i for i, p in enumerate(parts) if p.event == "updates" and "__interrupt__" in p.data)
    assert [p.event for p in parts[at + 1 :]] == ["end"]
    assert custom_of(parts, "tool_started") == []

    assert (await client.threads.get(tid))["status"] == "interrupted"
    state = await client.threads.get_state(tid)
    assert [i["id"] for i in state["interrupts"]] == [interrupt["id"]]
    assert state["interrupts"][0]["value"] == value
    assert state["next"] == ["tools"]
    assert await workspace_file(http, tid, "greeting.txt") is None
    assert not workspace_path(server.data_dir, tid, "greeting.txt").exists()
    assert await audit_rows(http, tid) == []

    resumed = await collect(
        client.runs.stream(
            tid,
            "agent",
            command={"resume": {interrupt["id"]: {"decision": "approve"}}},
            stream_mode=MODES,
        )
    )
    assert resumed[-1].event == "end" and resumed[-1].data["status"] == "success"
    assert [e["args"] for e in custom_of(resumed, "tool_started")] == [value["args"]]
    assert interrupts_in(resumed) == []

    state = await client.threads.get_state(tid)
    assert state["values"]["status"] == "verified", state["values"].get("verdict")
    assert state["interrupts"] == []
    assert (await client.threads.get(tid))["status"] == "idle"
    assert await workspace_file(http, tid, "greeting.txt") == "Hello, Ada!\n"

    rows = await audit_rows(http, tid)
    writes = tool_rows(rows)
    assert len(writes) == 1, rows
    assert writes[0]["tool_call_id"] == value["tool_call_id"]
    assert writes[0]["detail"]["ok"] is True
    assert writes[0]["detail"]["args"] == value["args"]
    decisions = decision_rows(rows)
    assert len(decisions) == 1, rows
    assert decisions[0]["detail"] == {
        "interrupt_id": interrupt["id"],
        "answer": {"decision": "approve"},
    }
    # The decision is logged before the tool it allowed.
    assert decisions[0]["id"] < writes[0]["id"]

    # The interrupt is answered: answering it again is refused, and nothing runs.
    with pytest.raises(ConflictError):
        await client.runs.create(
            tid, "agent", command={"resume": {interrupt["id"]: {"decision": "approve"}}}
        )
    assert len(tool_rows(await audit_rows(http, tid))) == 1


# -- edit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "status"),
    [("Hello, Edited!\n", "failed"), ("Hello, Ada!   \n\n", "verified")],
    ids=["edit-fails-the-check", "edit-passes-the-check"],
)
async def test_edit_runs_the_call_with_the_edited_args(
    client: Any, http: httpx.AsyncClient, content: str, status: str
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [interrupt] = interrupts_in(parts)
    edited = {"path": "greeting.txt", "content": content}

    run = await approve_via_endpoint(
        http, tid, interrupt["id"], decision="edit", args=edited, message="tweaked"
    )
    assert run["thread_id"] == tid
    assert run["kwargs"]["command"]["resume"] == {
        interrupt["id"]: {"decision": "edit", "args": edited, "message": "tweaked"}
    }
    values = await join(client, tid, run["run_id"])

    # Exactly the edited bytes were written (the check strips whitespace: the second edit
    # passes although it differs from what the agent proposed).
    assert await workspace_file(http, tid, "greeting.txt") == content
    assert values["status"] == status, values.get("verdict")
    assert values["verdict"]["passed"] is (status == "verified")
    rows = await audit_rows(http, tid)
    [write] = tool_rows(rows)
    assert write["detail"]["args"] == edited
    [decision] = decision_rows(rows)
    # Without authentication the caller is anonymous; no header names anyone (see test_auth).
    assert decision["actor"] == "anonymous"
    assert decision["detail"]["answer"]["decision"] == "edit"
    tool_messages = [m for m in values["messages"] if m["type"] == "tool"]
    assert len(tool_messages) == 1 and tool_messages[0]["status"] == "success"


# -- reject -------------------------------------------------------------------------------------


async def test_reject_returns_the_message_to_the_model_and_writes_nothing(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [interrupt] = interrupts_in(parts)
    run = await approve_via_endpoint(
        http, tid, interrupt["id"], decision="reject", message="no greetings on Sundays"
    )
    await join(client, tid, run["run_id"])

    state = await client.threads.get_state(tid)
    values = state["values"]
    assert state["interrupts"] == []
    assert values["status"] == "failed"
    assert values["verdict"]["passed"] is False
    assert "does not exist" in values["verdict"]["output"]
    [tool_message] = [m for m in values["messages"] if m["type"] == "tool"]
    assert tool_message["status"] == "error"
    assert tool_message["tool_call_id"] == interrupt["value"]["tool_call_id"]
    assert "rejected" in tool_message["content"]
    assert "no greetings on Sundays" in tool_message["content"]
    # The model read it: its next reply quotes the rejection.
    ai = [m for m in values["messages"] if m["type"] == "ai"]
    assert "rejected" in ai[1]["content"]

    assert await workspace_file(http, tid, "greeting.txt") is None
    assert not workspace_path(server.data_dir, tid, "greeting.txt").exists()
    rows = await audit_rows(http, tid)
    assert tool_rows(rows) == []
    [decision] = decision_rows(rows)
    assert decision["detail"]["answer"] == {
        "decision": "reject",
        "message": "no greetings on Sundays",
    }
    assert (await client.threads.get(tid))["status"] == "idle"


# -- two parallel calls, two approvals ----------------------------------------------------------


def by_path(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["value"]["args"]["path"]: i for i in found}


async def test_notes_answered_one_at_a_time(client: Any, http: httpx.AsyncClient) -> None:
    tid, parts = await start_interrupted(client, NOTES)
    pending = by_path(interrupts_in(parts))
    assert set(pending) == {"a.txt", "b.txt"}
    a, b = pending["a.txt"], pending["b.txt"]
    assert a["id"] != b["id"]
    assert sorted(await pending_ids(client, tid)) == sorted([a["id"], b["id"]])

    # Two are pending: an answer that is not a map from interrupt id is refused.
    with pytest.raises(ConflictError) as refused:
        await client.runs.create(tid, "agent", command={"resume": {"decision": "approve"}})
    assert "map" in refused.value.response.json()["detail"]

    first = await asyncio.wait_for(
        client.runs.wait(tid, "agent", command={"resume": {a["id"]: {"decision": "approve"}}}),
        WAIT,
    )
    # a.txt is written; b.txt still waits, under the same interrupt id.
    assert [i["id"] for i in first["__interrupt__"]] == [b["id"]]
    assert await pending_ids(client, tid) == [b["id"]]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    assert await workspace_file(http, tid, "a.txt") == "alpha\n"
    assert await workspace_file(http, tid, "b.txt") is None
    assert [r["detail"]["args"]["path"] for r in tool_rows(await audit_rows(http, tid))] == [
        "a.txt"
    ]

    # The answered id is stale now: 409, naming what is pending.
    with pytest.raises(ConflictError) as stale:
        await client.runs.create(
            tid, "agent", command={"resume": {a["id"]: {"decision": "approve"}}}
        )
    assert b["id"] in stale.value.response.json()["detail"]

    final = await asyncio.wait_for(
        client.runs.wait(tid, "agent", command={"resume": {b["id"]: {"decision": "approve"}}}),
        WAIT,
    )
    assert final["status"] == "verified", final.get("verdict")
    assert "__interrupt__" not in final
    assert await workspace_file(http, tid, "a.txt") == "alpha\n"
    assert await workspace_file(http, tid, "b.txt") == "beta\n"
    rows = await audit_rows(http, tid)
    assert sorted(r["detail"]["args"]["path"] for r in tool_rows(rows)) == ["a.txt", "b.txt"]
    assert len(decision_rows(rows)) == 2
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_notes_answered_both_at_once(client: Any, http: httpx.AsyncClient) -> None:
    tid, parts = await start_interrupted(client, NOTES)
    pending = by_path(interrupts_in(parts))
    answers = {
        pending["a.txt"]["id"]: {"decision": "approve"},
        pending["b.txt"]["id"]: {
            "decision": "edit",
            "args": {"path": "b.txt", "content": "beta\n"},
        },
    }
    resumed = await collect(
        client.runs.stream(tid, "agent", command={"resume": answers}, stream_mode=MODES)
    )
    assert resumed[-1].data["status"] == "success"
    assert interrupts_in(resumed) == []
    assert len(custom_of(resumed, "tool_started")) == 2
    state = await client.threads.get_state(tid)
    assert state["values"]["status"] == "verified", state["values"].get("verdict")
    assert state["interrupts"] == []
    assert await workspace_file(http, tid, "a.txt") == "alpha\n"
    assert await workspace_file(http, tid, "b.txt") == "beta\n"
    rows = await audit_rows(http, tid)
    assert sorted(r["detail"]["args"]["path"] for r in tool_rows(rows)) == ["a.txt", "b.txt"]
    decided = {r["detail"]["interrupt_id"]: r["detail"]["answer"] for r in decision_rows(rows)}
    assert decided == answers


# -- concurrent decisions -----------------------------------------------------------------------


async def test_twenty_concurrent_approvals_apply_once(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [interrupt] = interrupts_in(parts)
    body = {"interrupt_id": interrupt["id"], "decision": "approve"}

    async def post(i: int) -> httpx.Response:
        return await http.post(
            f"/threads/{tid}/approvals", json=body, headers={"X-Actor": f"racer-{i}"}
        )

    responses = await asyncio.wait_for(asyncio.gather(*(post(i) for i in range(20))), WAIT)
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [409] * 19, [(r.status_code, r.text) for r in responses]
    for r in responses:
        if r.status_code == 409:
            detail = r.json()["detail"]
            # Says why: this interrupt was answered already (not "a run is active").
            assert interrupt["id"] in detail and "already answered" in detail, detail
    [winner] = [r for r in responses if r.status_code == 200]

    values = await join(client, tid, winner.json()["run_id"])
    assert values["status"] == "verified", values.get("verdict")
    assert await workspace_file(http, tid, "greeting.txt") == "Hello, Ada!\n"
    rows = await audit_rows(http, tid)
    assert len(tool_rows(rows)) == 1, rows
    [decision] = decision_rows(rows)
    # The decision is the winning request's: its run, and not whatever the header claimed.
    assert decision["run_id"] == winner.json()["run_id"]
    assert decision["actor"] == "anonymous"
    runs = await client.runs.list(tid)
    assert len(runs) == 2  # the first run and the one resume


# -- malformed decisions: nothing runs -----------------------------------------------------------


async def test_bad_decisions_are_refused_and_nothing_runs(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [interrupt] = interrupts_in(parts)
    iid = interrupt["id"]
    url = f"/threads/{tid}/approvals"

    async def still_pending() -> None:
        assert await pending_ids(client, tid) == [iid]
        assert (await client.threads.get(tid))["status"] == "interrupted"
        assert await workspace_file(http, tid, "greeting.txt") is None
        assert await audit_rows(http, tid) == []
        assert len(await client.runs.list(tid)) == 1

    # Not a decision word: refused by the endpoint's schema and by the resume check.
    res = await http.post(url, json={"interrupt_id": iid, "decision": "maybe"})
    assert res.status_code == 422, res.text
    assert "decision" in res.text
    with pytest.raises(UnprocessableEntityError) as err:
        await client.runs.create(tid, "agent", command={"resume": {iid: {"decision": "maybe"}}})
    assert "maybe" in err.value.response.json()["detail"]
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "agent", command={"resume": {"decision": "maybe"}})
    await still_pending()

    # Edited args are checked against the tool's schema, naming the argument.
    for args, named in (
        ({"path": 5, "content": "x"}, "path"),
        ({"path": "greeting.txt"}, "content"),
        ({"path": "greeting.txt", "content": ["not", "text"]}, "content"),
    ):
        res = await http.post(url, json={"interrupt_id": iid, "decision": "edit", "args": args})
        assert res.status_code == 422, res.text
        detail = res.json()["detail"]
        assert "write_file" in detail and named in detail, detail
    res = await http.post(url, json={"interrupt_id": iid, "decision": "edit"})
    assert res.status_code == 422, res.text
    assert "args" in res.json()["detail"]
    await still_pending()

    # An interrupt id that is not pending: 409 naming the pending one.
    for unknown in ("0" * 32, "not-an-interrupt-id"):
        res = await http.post(url, json={"interrupt_id": unknown, "decision": "approve"})
        assert res.status_code == 409, (unknown, res.text)
        assert iid in res.json()["detail"], res.text
    with pytest.raises(ConflictError) as stale:
        await client.runs.create(
            tid, "agent", command={"resume": {"f" * 32: {"decision": "approve"}}}
        )
    assert iid in stale.value.response.json()["detail"]
    await still_pending()

    # A thread that waits for nothing cannot be resumed.
    idle = (await client.threads.create())["thread_id"]
    res = await http.post(
        f"/threads/{idle}/approvals", json={"interrupt_id": iid, "decision": "approve"}
    )
    assert res.status_code == 409, res.text
    assert "no pending interrupt" in res.json()["detail"]
    with pytest.raises(ConflictError):
        await client.runs.create(idle, "agent", command={"resume": {"decision": "approve"}})
    await still_pending()

    # After all that, the one valid answer still works.
    run = await approve_via_endpoint(http, tid, iid, decision="approve")
    values = await join(client, tid, run["run_id"])
    assert values["status"] == "verified"
    assert await workspace_file(http, tid, "greeting.txt") == "Hello, Ada!\n"
    assert len(tool_rows(await audit_rows(http, tid))) == 1
    # ... and the thread is no longer interrupted: resuming it again is refused.
    res = await http.post(url, json={"interrupt_id": iid, "decision": "approve"})
    assert res.status_code == 409, res.text


# -- per-run policy -----------------------------------------------------------------------------


async def test_run_policy_deny_refuses_the_call(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(
        client.runs.stream(
            tid,
            "agent",
            input=greet("Ada"),
            stream_mode=MODES,
            config={"configurable": {"approval_policy": {"*": "deny"}}},
        )
    )
    assert interrupts_in(parts) == []
    assert custom_of(parts, "tool_started") == []
    assert parts[-1].data["status"] == "success"
    values = (await client.threads.get_state(tid))["values"]
    [tool_message] = [m for m in values["messages"] if m["type"] == "tool"]
    assert tool_message["status"] == "error"
    assert "denied" in tool_message["content"]
    assert values["status"] == "failed"
    assert await workspace_file(http, tid, "greeting.txt") is None
    assert not workspace_path(server.data_dir, tid, "greeting.txt").exists()
    assert await audit_rows(http, tid) == []
