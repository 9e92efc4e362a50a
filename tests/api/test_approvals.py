"""Human approval over HTTP: risky tool calls stop for a decision, resume once.

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

from agent.approval import is_approval_request
from agent.tools import default_tools
from tests.utils.runs import MODES, collect
from tests.utils.server import ServerProcess
from tests.utils.tasks import greet, notes
from tests.utils.workspace import workspace_path

WAIT = 60.0
INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")
APPROVE = {"decisions": [{"type": "approve"}]}
"""An approval answer (LangChain's human-in-the-loop format): ``{"decisions": [...]}``, one
decision per call the request asks about, in their order."""
NEW_SHAPE = re.compile(r'\{"decisions": \[<?one decision[^\]]*\]\}')
"""How every refusal of a malformed answer to a one-call request describes a valid one."""


def edit_decision(args: Any, name: str = "write_file") -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


def edit(args: Any, name: str = "write_file") -> dict[str, Any]:
    return {"decisions": [edit_decision(args, name)]}


def reject(message: str) -> dict[str, Any]:
    return {"decisions": [{"type": "reject", "message": message}]}


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
    # Paused at an interrupt: the run ends success, as on LangGraph Server; the thread waits.
    assert parts[-1].data["status"] == "success", parts[-1]
    assert (await client.threads.get(tid))["status"] == "interrupted"
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
    assert is_approval_request(value)
    [action] = value["action_requests"]
    assert action["name"] == "write_file"
    assert action["args"] == {"path": "greeting.txt", "content": "Hello, Ada!\n"}
    assert "ask" in action["description"]
    [call_id] = value["tool_call_ids"]
    assert call_id
    # The form a client renders: the decisions it may send, the schema an edit must meet.
    write_file = next(t for t in default_tools() if t.name == "write_file")
    assert value["review_configs"] == [
        {
            "action_name": "write_file",
            "allowed_decisions": ["approve", "edit", "reject"],
            "args_schema": write_file.args_schema.model_json_schema(),
        }
    ]
    assert value["policies"] == [{"rule": "ask", "source": "default", "server_rule": "ask"}]
    at = next(i for i, p in enumerate(parts) if p.event == "updates" and "__interrupt__" in p.data)
    assert [p.event for p in parts[at + 1 :]] == ["end"]
    assert custom_of(parts, "tool_started") == []

    assert (await client.threads.get(tid))["status"] == "interrupted"
    state = await client.threads.get_state(tid)
    assert [i["id"] for i in state["interrupts"]] == [interrupt["id"]]
    assert state["interrupts"][0]["value"] == value
    assert state["next"] == ["review"]
    assert await workspace_file(http, tid, "greeting.txt") is None
    assert not workspace_path(server.data_dir, tid, "greeting.txt").exists()
    assert await audit_rows(http, tid) == []

    resumed = await collect(
        client.runs.stream(
            tid,
            "agent",
            command={"resume": {interrupt["id"]: APPROVE}},
            stream_mode=MODES,
        )
    )
    assert resumed[-1].event == "end" and resumed[-1].data["status"] == "success"
    assert [e["args"] for e in custom_of(resumed, "tool_started")] == [action["args"]]
    assert interrupts_in(resumed) == []

    state = await client.threads.get_state(tid)
    assert state["values"]["status"] == "verified", state["values"].get("verdict")
    assert state["interrupts"] == []
    assert (await client.threads.get(tid))["status"] == "idle"
    assert await workspace_file(http, tid, "greeting.txt") == "Hello, Ada!\n"

    rows = await audit_rows(http, tid)
    writes = tool_rows(rows)
    assert len(writes) == 1, rows
    assert writes[0]["tool_call_id"] == call_id
    assert writes[0]["detail"]["ok"] is True
    assert writes[0]["detail"]["args"] == action["args"]
    decisions = decision_rows(rows)
    assert len(decisions) == 1, rows
    assert decisions[0]["detail"] == {
        "interrupt_id": interrupt["id"],
        "answer": APPROVE,
        "via": "http",
    }
    # The decision is logged before the tool it allowed.
    assert decisions[0]["id"] < writes[0]["id"]

    # The interrupt is answered: answering it again is refused, and nothing runs.
    with pytest.raises(ConflictError):
        await client.runs.create(tid, "agent", command={"resume": {interrupt["id"]: APPROVE}})
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

    run = await approve_via_endpoint(http, tid, interrupt["id"], **edit(edited))
    assert run["thread_id"] == tid
    assert run["kwargs"]["command"]["resume"] == {interrupt["id"]: edit(edited)}
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
    assert decision["detail"]["answer"] == edit(edited)
    tool_messages = [m for m in values["messages"] if m["type"] == "tool"]
    assert len(tool_messages) == 1 and tool_messages[0]["status"] == "success"


# -- reject -------------------------------------------------------------------------------------


async def test_reject_returns_the_message_to_the_model_and_writes_nothing(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [interrupt] = interrupts_in(parts)
    run = await approve_via_endpoint(
        http, tid, interrupt["id"], **reject("no greetings on Sundays")
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
    assert tool_message["tool_call_id"] == interrupt["value"]["tool_call_ids"][0]
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
    assert decision["detail"]["answer"] == reject("no greetings on Sundays")
    assert (await client.threads.get(tid))["status"] == "idle"


# -- two parallel calls, one approval request -----------------------------------------------------


async def test_notes_asks_once_and_each_decision_applies_to_its_own_call(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    """``notes`` writes two files in one step: one interrupt asks about both calls. An answer
    needs one decision per call; approve + reject runs exactly the approved call, once."""
    tid, parts = await start_interrupted(client, notes())
    [interrupt] = interrupts_in(parts)
    iid, value = interrupt["id"], interrupt["value"]
    assert is_approval_request(value)
    assert [(a["name"], a["args"]) for a in value["action_requests"]] == [
        ("write_file", {"path": "a.txt", "content": "alpha\n"}),
        ("write_file", {"path": "b.txt", "content": "beta\n"}),
    ]
    assert [c["action_name"] for c in value["review_configs"]] == ["write_file", "write_file"]
    a_call, b_call = value["tool_call_ids"]
    assert a_call != b_call
    assert value["policies"] == [{"rule": "ask", "source": "default", "server_rule": "ask"}] * 2
    assert await pending_ids(client, tid) == [iid]
    assert custom_of(parts, "tool_started") == []
    url = f"/threads/{tid}/approvals"

    async def still_pending() -> None:
        assert await pending_ids(client, tid) == [iid]
        assert await audit_rows(http, tid) == []
        assert await workspace_file(http, tid, "a.txt") is None
        assert len(await client.runs.list(tid)) == 1

    # One decision for two calls: 422 naming how many it takes (the endpoint and a resume).
    res = await http.post(url, json={"interrupt_id": iid, **APPROVE})
    assert res.status_code == 422, res.text
    detail = res.json()["detail"]
    assert "exactly 2" in detail and "2 calls" in detail and "not 1" in detail, detail
    for resume in ({iid: APPROVE}, APPROVE):
        with pytest.raises(UnprocessableEntityError) as err:
            await client.runs.create(tid, "agent", command={"resume": resume})
        assert "exactly 2" in err.value.response.json()["detail"]
    # A bad decision among two is named by its place and tool.
    broken = {"decisions": [{"type": "approve"}, edit_decision({"path": "b.txt"})]}
    res = await http.post(url, json={"interrupt_id": iid, **broken})
    assert res.status_code == 422, res.text
    assert "decision 2 (write_file)" in res.json()["detail"], res.text
    assert "content" in res.json()["detail"], res.text
    await still_pending()

    answer = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "not b"}]}
    run = await approve_via_endpoint(http, tid, iid, **answer)
    assert run["kwargs"]["command"]["resume"] == {iid: answer}
    values = await join(client, tid, run["run_id"])
    assert "__interrupt__" not in values

    # Exactly the approved call ran, once; the rejected one never did.
    assert await workspace_file(http, tid, "a.txt") == "alpha\n"
    assert await workspace_file(http, tid, "b.txt") is None
    assert not workspace_path(server.data_dir, tid, "b.txt").exists()
    rows = await audit_rows(http, tid)
    [write] = tool_rows(rows)
    assert write["tool_call_id"] == a_call
    assert write["detail"]["args"] == {"path": "a.txt", "content": "alpha\n"}
    [decision] = decision_rows(rows)
    assert decision["detail"] == {"interrupt_id": iid, "answer": answer, "via": "http"}
    assert decision["id"] < write["id"]
    results = {m["tool_call_id"]: m for m in values["messages"] if m["type"] == "tool"}
    assert set(results) == {a_call, b_call}
    assert results[a_call]["status"] == "success"
    assert results[b_call]["status"] == "error"
    assert "rejected" in results[b_call]["content"] and "not b" in results[b_call]["content"]

    # The interrupt is answered: a second answer is refused (409), and nothing runs again.
    both = {"decisions": [{"type": "approve"}, {"type": "approve"}]}
    res = await http.post(url, json={"interrupt_id": iid, **both})
    assert res.status_code == 409, res.text
    with pytest.raises(ConflictError):
        await client.runs.create(tid, "agent", command={"resume": {iid: both}})
    rows = await audit_rows(http, tid)
    assert len(tool_rows(rows)) == 1 and len(decision_rows(rows)) == 1
    assert await workspace_file(http, tid, "b.txt") is None


async def test_notes_answered_with_an_approval_and_an_edit(
    client: Any, http: httpx.AsyncClient
) -> None:
    """Both decisions in one resume (a map keyed by the interrupt id): both calls run, the
    second with its edited arguments."""
    tid, parts = await start_interrupted(client, notes())
    [interrupt] = interrupts_in(parts)
    answer = {
        "decisions": [{"type": "approve"}, edit_decision({"path": "b.txt", "content": "beta\n"})]
    }
    resumed = await collect(
        client.runs.stream(
            tid, "agent", command={"resume": {interrupt["id"]: answer}}, stream_mode=MODES
        )
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
    writes = {r["tool_call_id"]: r["detail"]["args"]["path"] for r in tool_rows(rows)}
    a_call, b_call = interrupt["value"]["tool_call_ids"]
    assert writes == {a_call: "a.txt", b_call: "b.txt"}
    decided = {r["detail"]["interrupt_id"]: r["detail"]["answer"] for r in decision_rows(rows)}
    assert decided == {interrupt["id"]: answer}
    assert (await client.threads.get(tid))["status"] == "idle"


# -- concurrent decisions -----------------------------------------------------------------------


async def test_twenty_concurrent_approvals_apply_once(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [interrupt] = interrupts_in(parts)
    body = {"interrupt_id": interrupt["id"], **APPROVE}

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

    # The old {"decision": ...} answer: refused by the endpoint's schema and by the resume
    # check, each showing the answer's shape now.
    res = await http.post(url, json={"interrupt_id": iid, "decision": "approve"})
    assert res.status_code == 422, res.text
    assert NEW_SHAPE.search(res.json()["detail"]), res.text
    with pytest.raises(UnprocessableEntityError) as err:
        await client.runs.create(tid, "agent", command={"resume": {iid: {"decision": "approve"}}})
    assert NEW_SHAPE.search(err.value.response.json()["detail"])
    await still_pending()

    # Not a decision type, or not one decision per asked call: refused the same way.
    maybe = {"decisions": [{"type": "maybe"}]}
    res = await http.post(url, json={"interrupt_id": iid, **maybe})
    assert res.status_code == 422, res.text
    assert "maybe" in res.json()["detail"] and NEW_SHAPE.search(res.json()["detail"]), res.text
    with pytest.raises(UnprocessableEntityError) as err:
        await client.runs.create(tid, "agent", command={"resume": {iid: maybe}})
    assert "maybe" in err.value.response.json()["detail"]
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "agent", command={"resume": maybe})
    two = {"decisions": [{"type": "approve"}, {"type": "reject"}]}
    res = await http.post(url, json={"interrupt_id": iid, **two})
    assert res.status_code == 422, res.text
    assert "exactly 1 (the request asks about one call), not 2" in res.json()["detail"], res.text
    with pytest.raises(UnprocessableEntityError) as err:
        await client.runs.create(tid, "agent", command={"resume": {iid: two}})
    assert "exactly 1" in err.value.response.json()["detail"]
    await still_pending()

    # Edited args are checked against the tool's schema, naming the argument.
    for args, named in (
        ({"path": 5, "content": "x"}, "path"),
        ({"path": "greeting.txt"}, "content"),
        ({"path": "greeting.txt", "content": ["not", "text"]}, "content"),
    ):
        res = await http.post(url, json={"interrupt_id": iid, **edit(args)})
        assert res.status_code == 422, res.text
        detail = res.json()["detail"]
        assert "write_file" in detail and named in detail, detail
    res = await http.post(url, json={"interrupt_id": iid, "decisions": [{"type": "edit"}]})
    assert res.status_code == 422, res.text
    assert "edited_action" in res.json()["detail"]
    # An edit cannot switch tools: the approval was asked for write_file.
    other = edit({"command": "rm -rf ."}, name="run_command")
    res = await http.post(url, json={"interrupt_id": iid, **other})
    assert res.status_code == 422, res.text
    assert "cannot switch tools" in res.json()["detail"], res.text
    with pytest.raises(UnprocessableEntityError) as err:
        await client.runs.create(tid, "agent", command={"resume": {iid: other}})
    assert "cannot switch tools" in err.value.response.json()["detail"]
    await still_pending()

    # An interrupt id that is not pending: 409 naming the pending one.
    for unknown in ("0" * 32, "not-an-interrupt-id"):
        res = await http.post(url, json={"interrupt_id": unknown, **APPROVE})
        assert res.status_code == 409, (unknown, res.text)
        assert iid in res.json()["detail"], res.text
    with pytest.raises(ConflictError) as stale:
        await client.runs.create(tid, "agent", command={"resume": {"f" * 32: APPROVE}})
    assert iid in stale.value.response.json()["detail"]
    await still_pending()

    # A thread that waits for nothing cannot be resumed.
    idle = (await client.threads.create())["thread_id"]
    res = await http.post(f"/threads/{idle}/approvals", json={"interrupt_id": iid, **APPROVE})
    assert res.status_code == 409, res.text
    assert "no pending interrupt" in res.json()["detail"]
    with pytest.raises(ConflictError):
        await client.runs.create(idle, "agent", command={"resume": APPROVE})
    await still_pending()

    # After all that, the one valid answer still works.
    run = await approve_via_endpoint(http, tid, iid, **APPROVE)
    values = await join(client, tid, run["run_id"])
    assert values["status"] == "verified"
    assert await workspace_file(http, tid, "greeting.txt") == "Hello, Ada!\n"
    assert len(tool_rows(await audit_rows(http, tid))) == 1
    # ... and the thread is no longer interrupted: resuming it again is refused.
    res = await http.post(url, json={"interrupt_id": iid, **APPROVE})
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
