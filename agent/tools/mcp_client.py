"""The connection to an external MCP server (stdio, started in the calling thread's workspace,
or Streamable HTTP with the operator's headers), its tool list, and a result as text."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import IO, Any, TextIO, cast

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent, TextResourceContents, Tool

from agent.tools.mcp_config import McpServerConfig, with_workspace

MAX_PAGES = 100
"""Most pages of a tool list read."""
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The MCP SDK's own defaults for its HTTP client: 30 s to connect, write and wait for the pool;
300 s between two reads (a server may hold a response stream open)."""


def leaf_error(err: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def failure_reason(err: BaseException, errlog: IO[str] | None) -> str:
    leaf = leaf_error(err)
    text = str(leaf) or type(leaf).__name__
    if errlog is not None:
        errlog.seek(0)
        tail = errlog.read()[-600:].strip()
        if tail:
            text += f" (server stderr: {tail})"
    return text


@asynccontextmanager
async def connect(
    config: McpServerConfig, workspace: str, errlog: IO[str], *, discovery: bool = False
) -> AsyncIterator[Client]:
    """A connected client of ``config``'s server, a stdio one started in ``workspace``."""
    async with AsyncExitStack() as stack:
        if config.command:
            args = config.args
            if discovery and config.discovery_args is not None:
                args = config.discovery_args
            params = StdioServerParameters(
                command=config.command,
                args=[with_workspace(a, workspace) for a in args],
                env={k: with_workspace(v, workspace) for k, v in config.env.items()} or None,
                cwd=with_workspace(config.cwd, workspace),
            )
            transport: Any = stdio_client(params, errlog=cast(TextIO, errlog))
        else:
            # The SDK takes a client of ours to send the operator's headers.
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(config.headers), timeout=HTTP_TIMEOUT)
            )
            transport = streamable_http_client(str(config.url), http_client=http)
        client = Client(transport, read_timeout_seconds=config.timeout, cache=None)
        yield await stack.enter_async_context(client)


async def list_remote_tools(config: McpServerConfig, workspace: str) -> list[Tool]:
    """Every tool the server lists (all pages), within the server's timeout."""
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            with anyio.fail_after(config.timeout):
                async with connect(config, workspace, errlog, discovery=True) as client:
                    tools: list[Tool] = []
                    cursor: str | None = None
                    for _ in range(MAX_PAGES):
                        page = await client.list_tools(cursor=cursor)
                        tools.extend(page.tools)
                        cursor = page.next_cursor
                        if cursor is None:
                            break
                    return tools
        except TimeoutError:
            raise RuntimeError(f"no tool list within {config.timeout:g}s") from None
        except Exception as err:
            raise RuntimeError(failure_reason(err, errlog)) from None


def result_text(result: CallToolResult) -> str:
    """A call's text blocks (and embedded text resources), then its structured content."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif block.type == "resource" and isinstance(block.resource, TextResourceContents):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{block.type} content omitted]")
    text = "\n".join(parts)
    if result.structured_content is not None and not _same_json(text, result.structured_content):
        structured = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        text = f"{text}\n{structured}" if text else structured
    return text


def _same_json(text: str, value: Any) -> bool:
    """Whether ``text`` already is ``value`` as JSON (servers often send both)."""
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False
