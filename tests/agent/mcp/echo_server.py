"""A small stdio MCP server (the SDK's own ``MCPServer``) for the external-server tests: it shows
what a call carried (``_meta``), fails on request, sleeps, and answers with structured content."""

from __future__ import annotations

import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("echo")


@server.tool(
    name="echo.meta",
    description="Says the call's idempotency key.",
    annotations=ToolAnnotations(read_only_hint=True),
)
def echo_meta(ctx: Context, text: str) -> str:
    meta = ctx.request_context.meta or {}
    return f"{text} key={meta.get('threadline/idempotency_key')}"


@server.tool(description="Always fails.")
def fail(reason: str) -> str:
    raise ToolError(f"refused: {reason}")


@server.tool(description="Sleeps.", annotations=ToolAnnotations(read_only_hint=True))
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


@server.tool(description="Structured.", structured_output=True)
def count(n: int) -> dict[str, Any]:
    return {"n": n, "double": 2 * n}


if __name__ == "__main__":
    server.run()
