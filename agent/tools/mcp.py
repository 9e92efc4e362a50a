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
again" after a crash. A call that is not read-only is also journaled (:mod:`.mcp_journal`) from
just before it is sent: an attempt after a crash that lost its result in between gets the
journaled answer, or, when the answer never came, an error saying the outcome is unknown, and the
call is not sent twice (a trusted server's ``idempotentHint`` tool is sent again, same key).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
from mcp_types import RequestParamsMeta, Tool

from agent.tools import mcp_journal
from agent.tools.base import ToolContext, ToolError, ToolSpec
from agent.tools.mcp_client import (
    connect,
    failure_reason,
    leaf_error,
    list_remote_tools,
    result_text,
)
from agent.tools.mcp_config import McpServerConfig
from agent.tools.mcp_schema import McpArgs, args_model, tool_names

logger = logging.getLogger(__name__)

IDEMPOTENCY_META = "threadline/idempotency_key"
"""The ``_meta`` key of a call's idempotency key (``{thread_id}:{tool_call_id}``)."""


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


async def call_remote(
    config: McpServerConfig,
    tool: str,
    arguments: Mapping[str, Any],
    ctx: ToolContext,
    *,
    journaled: bool = True,
    resend: bool = False,
) -> str:
    """One call of ``tool``; ToolError for a failed call, a timeout or a dead server.

    ``journaled`` (calls that may change something): an earlier attempt of the same call that
    reached the server is answered from :mod:`agent.tools.mcp_journal` and not sent again, unless
    ``resend`` (the tool is idempotent) and the earlier attempt got no answer."""
    key = ctx.idempotency_key
    entry_key = mcp_journal.call_key(key, config.name, tool)
    if journaled:
        entry = await asyncio.to_thread(mcp_journal.read_entry, ctx.workspace, entry_key)
        if entry is not None and entry.get("state") == mcp_journal.ANSWERED:
            text = str(entry.get("text", ""))
            if entry.get("ok"):
                return text
            raise ToolError(text or f"{tool} failed (the server gave no message)")
        if entry is not None and not resend:
            raise ToolError(
                f"This call of {tool} was sent to MCP server {config.name!r} before threadline "
                "restarted, and its answer was lost; it was not sent again, since it may already "
                "have taken effect. Check its effect with a read-only tool before calling it again."
            )
    meta = cast(RequestParamsMeta, {IDEMPOTENCY_META: key})
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            with anyio.fail_after(config.timeout):
                async with connect(config, str(ctx.workspace), errlog) as client:
                    if journaled:
                        await _mark_sent(config, tool, ctx.workspace, entry_key)
                    result = await client.call_tool(tool, dict(arguments), meta=meta)
        except TimeoutError:
            raise ToolError(
                f"MCP server {config.name!r} did not finish {tool} within {config.timeout:g}s. "
                "It may or may not have taken effect: check before calling it again."
            ) from None
        except Exception as err:
            if isinstance(leaf_error(err), ToolError):
                raise leaf_error(err) from None
            raise ToolError(
                f"MCP server {config.name!r} failed on {tool}: {failure_reason(err, errlog)}. "
                "Try other arguments or another tool."
            ) from None
    text = result_text(result)
    ok = not result.is_error
    if not ok and not text:
        text = f"{tool} failed (the server gave no message)"
    if journaled:
        try:
            await asyncio.to_thread(
                mcp_journal.mark_answered, ctx.workspace, entry_key, config.name, tool, ok, text
            )
        except OSError as err:  # the run's own record still gets the result
            logger.warning("MCP journal: cannot record the answer to %s: %s", key, err)
    if not ok:
        raise ToolError(text)
    return text


async def _mark_sent(config: McpServerConfig, tool: str, workspace: Path, key: str) -> None:
    """Journal the call as sent, or refuse to send it: without the entry a restart could send
    it twice."""
    try:
        await asyncio.to_thread(mcp_journal.mark_sent, workspace, key, config.name, tool)
    except OSError as err:
        raise ToolError(
            f"{tool} of MCP server {config.name!r} was not sent: threadline cannot journal the "
            f"call ({err}). Tell the operator."
        ) from None


def _spec(config: McpServerConfig, remote: Tool, name: str) -> McpToolSpec:
    hints = remote.annotations
    read_only = bool(config.trusted and hints is not None and hints.read_only_hint)
    idempotent = bool(config.trusted and hints is not None and hints.idempotent_hint)

    async def run(ctx: ToolContext, args: McpArgs) -> str:
        return await call_remote(
            config, remote.name, args.arguments(), ctx, journaled=not read_only, resend=idempotent
        )

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
