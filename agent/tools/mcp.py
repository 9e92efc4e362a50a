"""External MCP servers' tools in the agent's registry, over the official ``mcp`` SDK's client.

At start-up :func:`discover_tools` lists each configured server's tools (concurrently, each
within its timeout); a server that cannot start or answer is reported in its
:class:`McpServerStatus`, never fatal. Every remote tool becomes one :class:`McpToolSpec`
(``{server}__{tool}``, its JSON schema unchanged). A tool is read-only only when the operator
marked its server ``trusted`` and the server says ``readOnlyHint``; otherwise it asks by default.

One connection per call: a stdio server is started for the call, in the calling thread's
workspace (``{workspace}`` in its arguments), and stopped after it, so a per-thread server needs
no pool, and a server or a threadline process that dies takes nothing with it but that call.
Each call carries its idempotency key in ``_meta`` (``threadline/idempotency_key``). The tools
node's hooks give MCP calls the built-in tools' audit and their "a recorded call is not sent
again" after a crash; a call cut off before its result was recorded is sent again with the same
key, for a server to recognise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, Any, TextIO, cast

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, RequestParamsMeta, TextContent, TextResourceContents, Tool

from agent.tools.base import ToolContext, ToolError, ToolSpec
from agent.tools.mcp_config import McpServerConfig, with_workspace
from agent.tools.mcp_schema import McpArgs, args_model, tool_names

logger = logging.getLogger(__name__)

IDEMPOTENCY_META = "threadline/idempotency_key"
"""The ``_meta`` key of a call's idempotency key (``{thread_id}:{tool_call_id}``)."""
MAX_PAGES = 100


@dataclass(frozen=True)
class McpToolSpec(ToolSpec):
    """A remote tool: where it lives and its schema as the server gave it."""

    server: str = ""
    remote_name: str = ""

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.args_schema.model_json_schema(),
            },
        }


@dataclass
class McpServerStatus:
    """What ``/info`` says of one server."""

    name: str
    transport: str
    trusted: bool
    status: str = "ok"
    """``ok``, or ``error`` (``error`` says why; the server then has no tools)."""
    error: str | None = None
    tools: list[McpToolSpec] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {
            "transport": self.transport,
            "trusted": self.trusted,
            "status": self.status,
            "error": self.error,
            "tools": [
                {"name": t.name, "remote_name": t.remote_name, "read_only": t.read_only}
                for t in self.tools
            ],
        }


def _leaf(err: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


def _reason(err: BaseException, errlog: IO[str] | None) -> str:
    leaf = _leaf(err)
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
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(config.headers))
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
            raise RuntimeError(_reason(err, errlog)) from None


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


async def call_remote(
    config: McpServerConfig, tool: str, arguments: Mapping[str, Any], ctx: ToolContext
) -> str:
    """One call of ``tool``; ToolError for a failed call, a timeout or a dead server."""
    meta = cast(RequestParamsMeta, {IDEMPOTENCY_META: ctx.idempotency_key})
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            with anyio.fail_after(config.timeout):
                async with connect(config, str(ctx.workspace), errlog) as client:
                    result = await client.call_tool(tool, dict(arguments), meta=meta)
        except TimeoutError:
            raise ToolError(
                f"MCP server {config.name!r} did not finish {tool} within {config.timeout:g}s. "
                "It may or may not have taken effect: check before calling it again."
            ) from None
        except Exception as err:
            raise ToolError(
                f"MCP server {config.name!r} failed on {tool}: {_reason(err, errlog)}. "
                "Try other arguments or another tool."
            ) from None
    text = result_text(result)
    if result.is_error:
        raise ToolError(text or f"{tool} failed (the server gave no message)")
    return text


def _spec(config: McpServerConfig, remote: Tool, name: str) -> McpToolSpec:
    hints = remote.annotations
    read_only = bool(config.trusted and hints is not None and hints.read_only_hint)

    async def run(ctx: ToolContext, args: McpArgs) -> str:
        return await call_remote(config, remote.name, args.arguments(), ctx)

    description = remote.description or remote.title or remote.name
    return McpToolSpec(
        name=name,
        description=f"{description} (tool {remote.name!r} of MCP server {config.name!r})",
        args_schema=args_model(name, remote.input_schema),
        read_only=read_only,
        run=run,
        server=config.name,
        remote_name=remote.name,
    )


async def discover_tools(
    configs: Mapping[str, McpServerConfig], taken: set[str] | None = None
) -> list[McpServerStatus]:
    """Each server's tools, listed at once; ``taken``: names already in the registry."""
    used = set(taken or ())
    with tempfile.TemporaryDirectory(prefix="threadline-mcp-") as scratch:
        listed = await asyncio.gather(*(list_or_error(c, scratch) for c in configs.values()))
    out: list[McpServerStatus] = []
    for config, found in zip(configs.values(), listed, strict=True):
        status = McpServerStatus(config.name, config.transport, config.trusted)
        if isinstance(found, str):
            logger.error("MCP server %r is unavailable: %s", config.name, found)
            status.status, status.error = "error", found
        else:
            by_remote = {t.name: t for t in found}
            names = tool_names(config.name, by_remote, used)
            used.update(names.values())
            status.tools = [_spec(config, by_remote[r], n) for r, n in names.items()]
            logger.info("MCP server %r: %d tools", config.name, len(status.tools))
        out.append(status)
    return out


async def list_or_error(config: McpServerConfig, workspace: str) -> list[Tool] | str:
    try:
        return await list_remote_tools(config, workspace)
    except Exception as err:
        return str(err)
