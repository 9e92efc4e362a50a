"""The journal of external MCP calls (``agent.tools.mcp_journal``): an attempt after a crash does
not send again a call an earlier attempt sent, whatever became of its answer. Against the real
stdio echo server, with the entries a killed attempt leaves behind."""

from __future__ import annotations

import sys
from pathlib import Path

from agent.tools import ToolContext, ensure_workspace, execute_tool
from agent.tools.mcp import McpToolSpec, discover_tools
from agent.tools.mcp_config import parse_mcp_servers
from agent.tools.mcp_journal import call_key, entry_path, mark_answered, mark_sent, read_entry

ECHO = str(Path(__file__).with_name("echo_server.py"))


async def echo_tools(**extra: object) -> dict[str, McpToolSpec]:
    config = {"command": sys.executable, "args": [ECHO], "timeout": 10, **extra}
    (status,) = await discover_tools(parse_mcp_servers({"echo": config}))
    assert status.status == "ok", status.error
    return {t.name: t for t in status.tools}


async def test_a_call_is_journaled_outside_the_workspace(tmp_path: Path) -> None:
    tools = await echo_tools()
    workspace = ensure_workspace(tmp_path / "data", "t1")
    ctx = ToolContext(workspace=workspace, idempotency_key="t1:c1")
    out = await execute_tool(tools["echo__count"], ctx, {"n": 2})
    assert out.ok and '"double": 4' in out.content
    key = call_key("t1:c1", "echo", "count")
    entry = read_entry(workspace, key)
    assert entry is not None and entry["state"] == "answered" and entry["ok"] is True
    assert entry_path(workspace, key).is_relative_to(tmp_path / "data" / "mcp-calls" / "t1")
    assert list(workspace.iterdir()) == []  # nothing the agent or the server can see


async def test_an_answered_call_is_answered_from_the_journal(tmp_path: Path) -> None:
    tools = await echo_tools()
    ctx = ToolContext(workspace=tmp_path, idempotency_key="t:c")
    answered = call_key("t:c", "echo", "count")
    mark_answered(tmp_path, answered, "echo", "count", True, "journaled answer")
    out = await execute_tool(tools["echo__count"], ctx, {"n": 2})
    assert out.ok and out.content == "journaled answer"  # the server was not asked
    mark_answered(tmp_path, call_key("t:c", "echo", "fail"), "echo", "fail", False, "refused")
    out = await execute_tool(tools["echo__fail"], ctx, {"reason": "x"})
    assert not out.ok and out.content == "refused"


async def test_a_call_sent_without_an_answer_is_not_sent_again(tmp_path: Path) -> None:
    tools = await echo_tools()
    ctx = ToolContext(workspace=tmp_path, idempotency_key="t:c")
    mark_sent(tmp_path, call_key("t:c", "echo", "count"), "echo", "count")
    out = await execute_tool(tools["echo__count"], ctx, {"n": 2})
    assert not out.ok and "it was not sent again" in out.content
    assert "Check its effect with a read-only tool" in out.content
    # Another call (another key) is sent as usual.
    other = ToolContext(workspace=tmp_path, idempotency_key="t:other")
    assert (await execute_tool(tools["echo__count"], other, {"n": 3})).ok


async def test_read_only_tools_of_a_trusted_server_are_not_journaled(tmp_path: Path) -> None:
    tools = await echo_tools(trusted=True)
    ctx = ToolContext(workspace=tmp_path, idempotency_key="t:c")
    sent = call_key("t:c", "echo", "echo.meta")
    mark_sent(tmp_path, sent, "echo", "echo.meta")  # ignored: a read may run again
    out = await execute_tool(tools["echo__echo_meta"], ctx, {"text": "hi"})
    assert out.ok and "hi key=t:c" in out.content
    assert (read_entry(tmp_path, sent) or {}).get("state") == "sent"  # left as it was
