"""MCP tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28) and
``InputRequiredResult`` for calls that wait for an approval, against real ``threadline serve``
processes, driven by the official ``mcp`` SDK client: its ``ClientSession`` declares the
extension and claims the ``"task"`` result shape through its public extension interface
(``extensions=`` / ``result_claims=``), and sends ``tasks/get|update|cancel`` as typed requests
of its own (``send_request``); ``mcp.Client`` drives the ``InputRequiredResult`` round trip with
its elicitation callback.

The servers keep the default approval policy: ``write_file`` and ``edit_file`` ask.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client import Client
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.api.test_mcp_server import (
    new_thread,
    pending_interrupt,
    text,
)
from tests.utils.db import create_database, drop_database
from tests.utils.keys import create_key
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(types.Result):
    """``CreateTaskResult``: a ``tools/call`` answered with a task."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskState(types.Result):
    """What ``tasks/get`` returns."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: Any = None
    input_responses: Any = None


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams


class UpdateTask(types.Request[TaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: TaskParams


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams


async def unresolved(result: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
    raise AssertionError("these tests take the task themselves (allow_claimed=True)")


@asynccontextmanager
async def session(
    url: str, headers: dict[str, str] | None = None, *, tasks: bool = True
) -> AsyncIterator[ClientSession]:
    """A 2026-07-28 SDK session; ``tasks``: declaring the extension and claiming its result."""
    claims: dict[str, Any] = {}
    if tasks:
        claim = ResultClaim(result_type="task", model=CreatedTask, resolve=unresolved)
        claims = {"extensions": {TASKS: {}}, "result_claims": {TASKS: [claim]}}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, **claims) as s,
    ):
        await s.discover()
        yield s


async def ask(s: ClientSession, name: str, args: dict[str, Any]) -> CreatedTask:
    created = await s.call_tool(name, args, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    return created


async def get(s: ClientSession, task_id: Any) -> TaskState:
    return await s.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskState)


async def update(s: ClientSession, task_id: Any, responses: Any) -> None:
    params = TaskParams(task_id=task_id, input_responses=responses)
    await s.send_request(UpdateTask(params=params), types.EmptyResult)


async def cancel(s: ClientSession, task_id: Any) -> None:
    await s.send_request(CancelTask(params=TaskParams(task_id=task_id)), types.EmptyResult)


async def poll(s: ClientSession, task_id: str, *until: str, timeout: float = 60) -> TaskState:
    async with asyncio.timeout(timeout):
        while True:
            state = await get(s, task_id)
            if state.status in until:
                return state
            assert state.status in ("working", "input_required"), state
            await asyncio.sleep(0.2)


def decide(key: str, decision: str, message: str | None = None) -> dict[str, Any]:
    content = {"decision": decision, **({"message": message} if message else {})}
    return {key: {"action": "accept", "content": content}}


async def refused(call: Any, code: int = types.INVALID_PARAMS) -> str:
    """The JSON-RPC error a request gets (never an internal error)."""
    with pytest.raises(MCPError) as caught:
        await call
    assert caught.value.code == code, caught.value.message
    return caught.value.message


async def audit(http: httpx.AsyncClient, thread_id: str, **kwargs: Any) -> list[dict[str, Any]]:
    response = await http.get(f"/threads/{thread_id}/audit", **kwargs)
    assert response.status_code == 200, response.text
    return list(response.json())


async def test_an_ask_call_becomes_a_task_decided_over_mcp_once(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    thread_id = await new_thread(http)
    async with session(f"{server.url}/threads/{thread_id}/mcp") as s:
        listed = await s.call_tool("list_files", {"path": "."})
        assert not listed.is_error, text(listed)  # a tool that does not ask: no task
        created = await ask(s, "write_file", {"path": "notes.txt", "content": "bye"})
        assert created.task_id.startswith(f"{thread_id}:")
        assert created.status in ("working", "input_required") and created.poll_interval_ms
        waiting = await poll(s, created.task_id, "input_required")
        interrupt = await pending_interrupt(http, thread_id)
        assert waiting.input_requests is not None and list(waiting.input_requests) == [
            interrupt["id"]
        ]
        request = waiting.input_requests[interrupt["id"]]
        assert request["method"] == "elicitation/create"
        assert "write_file" in request["params"]["message"]
        assert '"bye"' in request["params"]["message"]
        schema = request["params"]["requestedSchema"]
        assert schema["properties"]["decision"]["enum"] == ["approve", "reject"]
        missing = await http.get(f"/threads/{thread_id}/workspace/notes.txt")
        assert missing.status_code == 404  # not run before it is approved

        await update(s, created.task_id, decide(interrupt["id"], "approve"))
        done = await poll(s, created.task_id, "completed")
        assert done.result is not None and done.result["isError"] is False
        out = done.result["structuredContent"]
        assert out["ok"] is True and out["output"] == done.result["content"][0]["text"]
        assert out["run_id"] == created.task_id.split(":")[1] and out["tool_call_id"]
        # Exactly once: a second answer, over MCP or the approvals API, is refused.
        again = await refused(update(s, created.task_id, decide(interrupt["id"], "approve")))
        assert "completed" in again and "no input" in again
        answer = {"interrupt_id": interrupt["id"], "decisions": [{"type": "approve"}]}
        assert (await http.post(f"/threads/{thread_id}/approvals", json=answer)).status_code == 409
        assert (await get(s, created.task_id)).status == "completed"
    assert (await http.get(f"/threads/{thread_id}/workspace/notes.txt")).text == "bye"
    entries = await audit(http, thread_id)
    assert [(e["kind"], e["tool"]) for e in entries] == [
        ("tool", "list_files"),
        ("decision", None),
        ("tool", "write_file"),
    ]
    assert entries[1]["detail"]["via"] == "mcp"


async def test_a_rejection_and_a_cancel(server: ServerProcess, http: httpx.AsyncClient) -> None:
    thread_id = await new_thread(http)
    async with session(f"{server.url}/threads/{thread_id}/mcp") as s:
        created = await ask(s, "write_file", {"path": "n.txt", "content": "two"})
        key = next(iter((await poll(s, created.task_id, "input_required")).input_requests or {}))
        await update(s, created.task_id, decide(key, "reject", "keep it"))
        done = await poll(s, created.task_id, "completed")
        assert done.result is not None and done.result["isError"] is True
        assert "keep it" in done.result["content"][0]["text"]

        # A pending approval cancelled: rejected, and the task reads cancelled.
        created = await ask(s, "write_file", {"path": "n.txt", "content": "three"})
        await poll(s, created.task_id, "input_required")
        await cancel(s, created.task_id)
        assert (await poll(s, created.task_id, "cancelled")).status == "cancelled"
        await asyncio.sleep(1)  # the rejecting run ends: still cancelled, nothing ran
        assert (await get(s, created.task_id)).status == "cancelled"
        assert "cancelled" in await refused(cancel(s, created.task_id))
        assert "cancelled" in await refused(update(s, created.task_id, decide(key, "approve")))
    assert (await http.get(f"/threads/{thread_id}/workspace/n.txt")).status_code == 404
    kinds = [(e["kind"], e["tool"]) for e in await audit(http, thread_id)]
    assert kinds == [("decision", None), ("decision", None)]  # nothing ran


async def test_hostile_task_requests_get_errors_that_say_what_to_do(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    thread_id, other = await new_thread(http), await new_thread(http)
    async with session(f"{server.url}/threads/{thread_id}/mcp") as s:
        created = await ask(s, "write_file", {"path": "x.txt", "content": "b"})
        key = next(iter((await poll(s, created.task_id, "input_required")).input_requests or {}))
        for bad in (f"{thread_id}:{uuid.uuid4()}", f"{other}:{uuid.uuid4()}"):
            assert "No task" in await refused(get(s, bad))
        malformed: tuple[Any, ...] = ("nope", "", f"{thread_id}:not-a-uuid", 123, None, ["x"])
        for task_id in malformed:
            assert "taskId" in await refused(get(s, task_id))
        assert "taskId" in await refused(cancel(s, "::"))
        not_a_map: tuple[Any, ...] = ([], {}, "approve", None)
        for responses in not_a_map:
            assert "inputResponses is an object" in await refused(
                update(s, created.task_id, responses)
            )
        says = await refused(update(s, created.task_id, {"other-key": {"action": "accept"}}))
        assert "No outstanding input request ['other-key']" in says and key in says
        for response in (
            5,
            {"action": "maybe"},
            {"action": "accept", "content": {"decision": "maybe"}},
            {"action": "accept", "content": {"decision": "approve", "rm": "-rf"}},
            {"action": "accept", "content": {"decision": "reject", "message": 3}},
        ):
            says = await refused(update(s, created.task_id, {key: response}))
            assert f"inputResponses[{key!r}]" in says and '"decision"' in says
        assert (await get(s, created.task_id)).status == "input_required"  # nothing answered
        await update(s, created.task_id, {key: {"action": "decline"}})  # decline rejects
        done = await poll(s, created.task_id, "completed")
        assert done.result is not None and done.result["isError"] is True
        assert "is completed" in await refused(
            update(s, created.task_id, {key: {"action": "decline"}})
        )
    # Another thread's endpoint does not serve this thread's task.
    async with session(f"{server.url}/threads/{other}/mcp") as s:
        assert "on this endpoint" in await refused(get(s, created.task_id))
    # Without the extension declared: the methods are refused (-32021), the call waits as before.
    async with session(f"{server.url}/threads/{thread_id}/mcp", tasks=False) as s:
        says = await refused(get(s, created.task_id), -32021)
        assert TASKS in says


async def test_input_required_round_trip_decides_once(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """A client that can elicit (and has no tasks) gets the approval as an InputRequiredResult;
    ``mcp.Client`` answers it with its elicitation callback and retries: one decision, the
    tool's result."""
    thread_id = await new_thread(http)
    url = f"{server.url}/threads/{thread_id}/mcp"
    asked: list[types.ElicitRequestParams] = []

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as raw,
        Client(
            streamable_http_client(url, http_client=raw),
            mode="2026-07-28",
            elicitation_callback=approve,
        ) as client,
    ):
        wrote = await client.call_tool("write_file", {"path": "r.txt", "content": "yo"})
        assert not wrote.is_error and wrote.structured_content["ok"] is True, text(wrote)
        assert len(asked) == 1 and "write_file" in asked[0].message

        # The round trip by hand: a second retry with the same answer is refused.
        first = await client.session.call_tool(
            "edit_file", {"path": "r.txt", "old": "yo", "new": "ho"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult) and first.input_requests
        [key] = first.input_requests
        responses: types.InputResponses = {
            key: types.ElicitResult(action="accept", content={"decision": "approve"})
        }
        args = {"path": "r.txt", "old": "yo", "new": "ho"}
        retried = await client.session.call_tool(
            "edit_file", args, input_responses=responses, request_state=first.request_state
        )
        assert not retried.is_error, text(retried)
        twice = await client.session.call_tool(
            "edit_file", args, input_responses=responses, request_state=first.request_state
        )
        assert twice.is_error and "waits for no input" in text(twice)
        forged = await client.session.call_tool(
            "read_file", {"path": "r.txt"}, input_responses=responses, request_state="x:y"
        )
        assert forged.is_error and "taskId" in text(forged)
        # /mcp too: the assistant's run stops for approval; the retry resumes it.
        async with Client(
            streamable_http_client(f"{server.url}/mcp", http_client=raw),
            mode="2026-07-28",
            elicitation_callback=approve,
        ) as assistants:
            ran = await assistants.call_tool("agent", {"input": greet("Round")})
            out = ran.structured_content
            assert (out["status"], out["interrupts"]) == ("success", []), text(ran)
            assert len(asked) == 2 and "write_file" in asked[1].message
        greeting = await http.get(f"/threads/{out['thread_id']}/workspace/greeting.txt")
        assert greeting.text.startswith("Hello, Round")
    assert (await http.get(f"/threads/{thread_id}/workspace/r.txt")).text == "ho"
    decisions = [e for e in await audit(http, thread_id) if e["kind"] == "decision"]
    assert len(decisions) == 2 and {e["detail"]["via"] for e in decisions} == {"mcp"}


async def test_an_assistant_run_is_a_task_on_mcp(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    async with session(f"{server.url}/mcp") as s:
        created = await ask(s, "agent", {"input": greet("Tasks")})
        thread_id, run_id = created.task_id.split(":")
        waiting = await poll(s, created.task_id, "input_required")
        [(key, request)] = (waiting.input_requests or {}).items()
        assert "write_file" in request["params"]["message"]
        await update(s, created.task_id, decide(key, "approve"))
        done = await poll(s, created.task_id, "completed")
        assert done.result is not None and done.result["isError"] is False
        out = done.result["structuredContent"]
        assert (out["thread_id"], out["status"], out["interrupts"]) == (thread_id, "success", [])
        assert out["run_id"] != run_id  # the run that resumed it
    greeting = await http.get(f"/threads/{thread_id}/workspace/greeting.txt")
    assert greeting.text.startswith("Hello, Tasks")
    decisions = [e for e in await audit(http, thread_id) if e["kind"] == "decision"]
    assert [e["detail"]["via"] for e in decisions] == ["mcp"]


async def test_cancelling_a_working_task_cancels_its_run(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    async with session(f"{server.url}/mcp") as s:
        created = await ask(s, "agent", {"input": counter(30, delay=0.5)})
        thread_id, run_id = created.task_id.split(":")
        assert (await get(s, created.task_id)).status == "working"
        await cancel(s, created.task_id)
        cancelled = await poll(s, created.task_id, "cancelled")
        assert run_id in (cancelled.status_message or "")
    run = (await http.get(f"/threads/{thread_id}/runs/{run_id}")).json()
    assert run["status"] == "interrupted"  # the LangGraph API's word for a cancelled run


async def test_mcp_answers_an_interrupt_raised_through_another_door(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """A run started over the LangGraph API stops for approval; ``/mcp`` answers it once, with
    ``command`` or (a task-capable client) by the task of that run."""
    for via_task in (False, True):
        thread_id = await new_thread(http)
        started = await http.post(
            f"/threads/{thread_id}/runs/wait", json={"assistant_id": "agent", "input": greet()}
        )
        assert started.status_code == 200, started.text
        interrupt = await pending_interrupt(http, thread_id)
        answer = {interrupt["id"]: {"decisions": [{"type": "approve"}]}}
        call = {"thread_id": thread_id, "command": {"resume": answer}}
        async with session(f"{server.url}/mcp", tasks=False) as s:
            if via_task:
                runs = (await http.get(f"/threads/{thread_id}/runs")).json()
                task_id = f"{thread_id}:{runs[0]['run_id']}"
                async with session(f"{server.url}/mcp") as ts:
                    await poll(ts, task_id, "input_required")
                    await update(ts, task_id, decide(interrupt["id"], "approve"))
                    assert (await poll(ts, task_id, "completed")).status == "completed"
            else:
                resumed = await s.call_tool("agent", call)
                assert resumed.structured_content["status"] == "success", text(resumed)
                assert resumed.structured_content["interrupts"] == []
            again = await s.call_tool("agent", call)
            assert again.is_error and interrupt["id"] in text(again)
        assert (await http.get(f"/threads/{thread_id}/workspace/greeting.txt")).status_code == 200
        decisions = [e for e in await audit(http, thread_id) if e["kind"] == "decision"]
        assert [e["detail"]["via"] for e in decisions] == ["mcp"]


async def test_tenancy(keys_server: ServerProcess, tmp_path: Path) -> None:
    alice = {"x-api-key": create_key(tmp_path, keys_server.env["DATABASE_URL"], "alice")}
    bob = {"x-api-key": create_key(tmp_path, keys_server.env["DATABASE_URL"], "bob")}
    async with httpx.AsyncClient(base_url=keys_server.url, timeout=60) as http:
        async with session(f"{keys_server.url}/mcp", alice) as s:
            created = await ask(s, "agent", {"input": greet()})
            waiting = await poll(s, created.task_id, "input_required")
        key = next(iter(waiting.input_requests or {}))
        async with session(f"{keys_server.url}/mcp", bob) as s:
            assert "No task" in await refused(get(s, created.task_id))
            assert "No task" in await refused(update(s, created.task_id, decide(key, "approve")))
            assert "No task" in await refused(cancel(s, created.task_id))
        async with session(f"{keys_server.url}/mcp", alice) as s:
            assert (await get(s, created.task_id)).status == "input_required"  # untouched
            await update(s, created.task_id, decide(key, "approve"))
            await poll(s, created.task_id, "completed")
        thread_id = created.task_id.split(":")[0]
        decisions = [
            e for e in await audit(http, thread_id, headers=alice) if e["kind"] == "decision"
        ]
        assert [(e["actor"], e["detail"]["via"]) for e in decisions] == [("alice", "mcp")]


async def test_a_task_survives_a_sigkill_of_the_server(
    make_server: Callable[..., ServerProcess], pg_admin_url: str, tmp_path: Path
) -> None:
    url = create_database(pg_admin_url)
    try:
        proc = make_server(url, tmp_path).start()
        async with httpx.AsyncClient(base_url=proc.url, timeout=60) as http:
            thread_id = await new_thread(http)
            endpoint = f"{proc.url}/threads/{thread_id}/mcp"
            async with session(endpoint) as s:
                created = await ask(s, "write_file", {"path": "k.txt", "content": "kept"})
                await poll(s, created.task_id, "input_required")
            proc.kill()
            proc.start()
            async with session(endpoint) as s:
                waiting = await poll(s, created.task_id, "input_required")
                key = next(iter(waiting.input_requests or {}))
                await update(s, created.task_id, decide(key, "approve"))
                done = await poll(s, created.task_id, "completed")
                assert done.result is not None and done.result["isError"] is False
                assert "no input" in await refused(
                    update(s, created.task_id, decide(key, "approve"))
                )
            assert (await http.get(f"/threads/{thread_id}/workspace/k.txt")).text == "kept"
            kinds = [(e["kind"], e["tool"]) for e in await audit(http, thread_id)]
            assert kinds == [("decision", None), ("tool", "write_file")]
    finally:
        proc.stop()
        drop_database(pg_admin_url, url)
