"""MCP endpoints (issue 16, direction 1) against real ``threadline serve`` processes, driven by
the ``mcp`` SDK's own Streamable HTTP client in the 2026-07-28 mode and the older handshake
ones: ``/threads/{id}/mcp`` (the agent's tools over the thread's workspace) and ``/mcp`` (each
assistant as a tool that starts a durable run).

The module's server allows ``write_file`` and denies ``run_command``; ``edit_file`` keeps the
default rule (``ask``): its calls wait for a decision through the thread's approvals. A second
server with built-in keys checks tenancy and the default policy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from api.runs.assistant_config import default_assistant_id
from tests.utils.keys import create_key
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet

SERVER_ENV = {"THREADLINE_APPROVAL_POLICY": '{"write_file": "auto", "run_command": "deny"}'}
MODES = ["2026-07-28", "2025-11-25", "2025-03-26"]
"""The modern per-request revision, the newest handshake one, and an older handshake client."""


@asynccontextmanager
async def mcp_session(
    url: str, mode: str = "2025-11-25", headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A connected SDK session at protocol ``mode``."""
    # A client of ours carries the headers; the timeouts are the SDK's own defaults.
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        if mode == "2026-07-28":
            await session.discover()
        elif mode == "2025-11-25":
            await session.initialize()
        else:  # an older client: pin the version it proposes
            found = await session.send_request(
                types.InitializeRequest(
                    params=types.InitializeRequestParams(
                        protocol_version=mode,
                        capabilities=types.ClientCapabilities(),
                        client_info=types.Implementation(name="old-client", version="0"),
                    )
                ),
                types.InitializeResult,
            )
            session.adopt(found)
            await session.send_notification(types.InitializedNotification())
        assert session.protocol_version == mode
        yield session


async def new_thread(http: httpx.AsyncClient, **kwargs: Any) -> str:
    response = await http.post("/threads", json={}, **kwargs)
    assert response.status_code == 200, response.text
    return str(response.json()["thread_id"])


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_with_annotations(
    server: ServerProcess, http: httpx.AsyncClient, mode: str
) -> None:
    thread_id = await new_thread(http)
    async with mcp_session(f"{server.url}/threads/{thread_id}/mcp", mode) as session:
        listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {"list_files", "read_file", "write_file", "edit_file", "run_command"}
    read, write = tools["read_file"], tools["write_file"]
    assert read.annotations is not None and write.annotations is not None
    assert (read.annotations.read_only_hint, read.annotations.destructive_hint) == (True, False)
    assert read.annotations.idempotent_hint is True
    assert (write.annotations.read_only_hint, write.annotations.destructive_hint) == (False, True)
    assert write.annotations.idempotent_hint is False
    assert "path" in read.input_schema["properties"]
    assert read.description


@pytest.mark.parametrize("mode", ["2026-07-28", "2025-03-26"])
async def test_calls_run_the_tools_with_their_boundaries(
    server: ServerProcess, http: httpx.AsyncClient, mode: str
) -> None:
    thread_id = await new_thread(http)
    async with mcp_session(f"{server.url}/threads/{thread_id}/mcp", mode) as session:
        wrote = await session.call_tool("write_file", {"path": "notes.txt", "content": "hi mcp"})
        assert not wrote.is_error, text(wrote)
        read = await session.call_tool("read_file", {"path": "notes.txt"})
        assert not read.is_error and "hi mcp" in text(read)
        assert read.structured_content == {"ok": True, "output": text(read)}

        outside = await session.call_tool("read_file", {"path": "../../etc/passwd"})
        assert outside.is_error and "outside the workspace" in text(outside)
        assert outside.structured_content["ok"] is False

        invalid = await session.call_tool("read_file", {"nope": 1})
        assert invalid.is_error and "Invalid arguments for read_file" in text(invalid)

        denied = await session.call_tool("run_command", {"program": "ls", "args": []})
        assert denied.is_error and "denied" in text(denied)

        unknown = await session.call_tool("rm_rf", {})
        assert unknown.is_error and "No tool" in text(unknown)
    # Every call that reached a tool or the policy, under the caller's identity, outside any run.
    files = (await http.get(f"/threads/{thread_id}/workspace/notes.txt")).text
    assert files == "hi mcp"
    audit = (await http.get(f"/threads/{thread_id}/audit")).json()
    entries = [e for e in audit if e["kind"] == "tool"]
    assert [(e["tool"], e["detail"]["ok"]) for e in entries] == [
        ("write_file", True),
        ("read_file", True),
        ("read_file", False),
        ("read_file", False),
        ("run_command", False),  # denied: refused, and audited as refused
    ]
    assert {e["actor"] for e in entries} == {"anonymous"}
    assert all(e["run_id"] is None and e["detail"]["via"] == "mcp" for e in entries)
    assert all(e["idempotency_key"].startswith(f"{thread_id}:mcp-") for e in entries)


async def pending_interrupt(
    http: httpx.AsyncClient, thread_id: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    for _ in range(200):
        state = (await http.get(f"/threads/{thread_id}/state", headers=headers)).json()
        if state["interrupts"]:
            return dict(state["interrupts"][0])
        await asyncio.sleep(0.05)
    raise AssertionError("no approval was asked")


async def test_an_ask_tool_waits_for_its_decision_and_runs_once(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """``edit_file`` keeps the default rule (ask): the MCP call becomes a run of the agent on the
    thread, asked through the thread's approvals; approved, it runs once and the call returns
    its result; rejected, it does not run and the call says why."""
    thread_id = await new_thread(http)
    url = f"{server.url}/threads/{thread_id}/mcp"
    async with mcp_session(url, "2026-07-28") as session:
        await session.call_tool("write_file", {"path": "notes.txt", "content": "hi"})
        call = asyncio.create_task(
            session.call_tool("edit_file", {"path": "notes.txt", "old": "hi", "new": "bye"})
        )
        interrupt = await pending_interrupt(http, thread_id)
        [request] = interrupt["value"]["action_requests"]
        assert (request["name"], request["args"]["new"]) == ("edit_file", "bye")
        assert not call.done()  # it waits for the decision
        answer = {"interrupt_id": interrupt["id"], "decisions": [{"type": "approve"}]}
        approved = await http.post(f"/threads/{thread_id}/approvals", json=answer)
        assert approved.status_code == 200, approved.text
        edited = await asyncio.wait_for(call, 60)
        assert not edited.is_error, text(edited)
        assert "Replaced 1 occurrence" in text(edited)
        again = await http.post(f"/threads/{thread_id}/approvals", json=answer)
        assert again.status_code == 409  # a decision is applied once

        call = asyncio.create_task(
            session.call_tool("edit_file", {"path": "notes.txt", "old": "bye", "new": "no"})
        )
        interrupt = await pending_interrupt(http, thread_id)
        rejected = await http.post(
            f"/threads/{thread_id}/approvals",
            json={
                "interrupt_id": interrupt["id"],
                "decisions": [{"type": "reject", "message": "keep it"}],
            },
        )
        assert rejected.status_code == 200, rejected.text
        refused = await asyncio.wait_for(call, 60)
        assert refused.is_error and "keep it" in text(refused)
    assert (await http.get(f"/threads/{thread_id}/workspace/notes.txt")).text == "bye"
    audit = (await http.get(f"/threads/{thread_id}/audit")).json()
    assert [(e["kind"], e["tool"], e["actor"]) for e in audit] == [
        ("tool", "write_file", "anonymous"),
        ("decision", None, "anonymous"),
        ("tool", "edit_file", "anonymous"),  # the caller's call, not the agent's
        ("decision", None, "anonymous"),
    ]


async def test_an_unknown_thread_is_not_found(server: ServerProcess) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{server.url}/threads/no-such-thread/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 404 and "No thread" in response.json()["detail"]


@pytest.mark.parametrize("mode", ["2026-07-28", "2025-06-18"])
async def test_assistants_start_durable_runs(
    server: ServerProcess, http: httpx.AsyncClient, mode: str
) -> None:
    async with mcp_session(f"{server.url}/mcp", mode) as session:
        listed = await session.list_tools()
        assert "agent" in {t.name for t in listed.tools}
        done = await session.call_tool("agent", {"input": counter(1)})
        assert not done.is_error, text(done)
        out = done.structured_content
        assert out["status"] == "success" and out["interrupts"] == []
        assert json.loads(text(done))["run_id"] == out["run_id"]
        # The caller's own thread: a second run on it.
        again = await session.call_tool(
            "agent", {"input": counter(1), "thread_id": out["thread_id"]}
        )
        assert again.structured_content["thread_id"] == out["thread_id"]
        bad = await session.call_tool("agent", {"input": {"task": {"name": "nope"}}})
        assert bad.is_error
    run = (await http.get(f"/threads/{out['thread_id']}/runs/{out['run_id']}")).json()
    assert run["status"] == "success" and run["assistant_id"] == default_assistant_id("agent")


async def test_tenancy_and_the_default_policy(keys_server: ServerProcess, tmp_path: Path) -> None:
    alice = {"x-api-key": create_key(tmp_path, keys_server.env["DATABASE_URL"], "alice")}
    bob = {"x-api-key": create_key(tmp_path, keys_server.env["DATABASE_URL"], "bob")}
    async with httpx.AsyncClient(base_url=keys_server.url, timeout=60) as http:
        thread_id = await new_thread(http, headers=alice)
        url = f"{keys_server.url}/threads/{thread_id}/mcp"
        async with mcp_session(url, "2026-07-28", alice) as session:
            listed = await session.call_tool("list_files", {"path": "."})
            assert not listed.is_error, text(listed)
            # write_file asks (the default policy): alice's call waits for, and gets, her approval.
            call = asyncio.create_task(
                session.call_tool("write_file", {"path": "a.txt", "content": "x"})
            )
            interrupt = await pending_interrupt(http, thread_id, alice)
            approved = await http.post(
                f"/threads/{thread_id}/approvals",
                json={"interrupt_id": interrupt["id"], "decisions": [{"type": "approve"}]},
                headers=alice,
            )
            assert approved.status_code == 200, approved.text
            wrote = await asyncio.wait_for(call, 60)
            assert not wrote.is_error, text(wrote)
        for mode in ("2026-07-28", "2025-11-25"):
            with pytest.raises(Exception):  # noqa: B017 - the SDK's error for an HTTP 404
                async with mcp_session(url, mode, bob):
                    pass
        no_key = await http.post(f"/threads/{thread_id}/mcp", json={})
        assert no_key.status_code == 401
        audit = (await http.get(f"/threads/{thread_id}/audit", headers=alice)).json()
        assert [(e["kind"], e["tool"], e["actor"]) for e in audit] == [
            ("tool", "list_files", "alice"),
            ("decision", None, "alice"),
            ("tool", "write_file", "alice"),  # asked for by alice's MCP call
        ]

        # /mcp runs as the caller: an interrupted run, approved over the normal API.
        async with mcp_session(f"{keys_server.url}/mcp", "2025-11-25", alice) as session:
            started = await session.call_tool("agent", {"input": greet()})
            out = started.structured_content
            assert out["status"] == "success" and len(out["interrupts"]) == 1  # paused
            # ... or answered through /mcp itself, with a command.
            second = (await session.call_tool("agent", {"input": greet("Bo")})).structured_content
            answer = {second["interrupts"][0]["id"]: {"decisions": [{"type": "approve"}]}}
            resumed = await session.call_tool(
                "agent", {"thread_id": second["thread_id"], "command": {"resume": answer}}
            )
            assert resumed.structured_content["status"] == "success", text(resumed)
        async with mcp_session(f"{keys_server.url}/mcp", "2025-11-25", bob) as session:
            other = await session.call_tool("agent", {"input": counter(1), "thread_id": thread_id})
            assert other.is_error and "No thread" in text(other)
        hidden = await http.get(f"/threads/{out['thread_id']}", headers=bob)
        assert hidden.status_code == 404
        approved = await http.post(
            f"/threads/{out['thread_id']}/approvals",
            json={"interrupt_id": out["interrupts"][0]["id"], "decisions": [{"type": "approve"}]},
            headers=alice,
        )
        assert approved.status_code == 200, approved.text
        run_id = approved.json()["run_id"]
        joined = await http.get(f"/threads/{out['thread_id']}/runs/{run_id}/join", headers=alice)
        assert joined.status_code == 200, joined.text
        greeting = await http.get(
            f"/threads/{out['thread_id']}/workspace/greeting.txt", headers=alice
        )
        assert greeting.text.startswith("Hello, Ada")
        audit = (await http.get(f"/threads/{out['thread_id']}/audit", headers=alice)).json()
        assert [(e["kind"], e["actor"]) for e in audit] == [
            ("decision", "alice"),
            ("tool", "agent"),
        ]


@pytest.mark.parametrize(
    ("call", "says"),
    [
        ({"name": "rm_rf", "args": {}}, "no tool 'rm_rf'"),
        ({"name": "read_file", "args": {"nope": 1}}, "Invalid arguments for read_file"),
        ({"name": "read_file", "args": {"path": "a"}, "id": "../x"}, "input.call.id"),
        ({"name": "read_file", "args": {"path": "a"}, "check": ["sh"]}, "takes only"),
    ],
)
async def test_a_direct_call_input_is_checked(
    http: httpx.AsyncClient, call: dict[str, Any], says: str
) -> None:
    """``{"call": ...}`` (what an asked MCP call becomes) names a known tool with valid
    arguments; anything else is a 422 before anything is queued."""
    thread_id = await new_thread(http)
    res = await http.post(
        f"/threads/{thread_id}/runs", json={"assistant_id": "agent", "input": {"call": call}}
    )
    assert res.status_code == 422, res.text
    assert says in res.json()["detail"]
    both = await http.post(
        f"/threads/{thread_id}/runs",
        json={"assistant_id": "agent", "input": {"call": call, "messages": []}},
    )
    assert both.status_code == 422 and "alone" in both.json()["detail"]
