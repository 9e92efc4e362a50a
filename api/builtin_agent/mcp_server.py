"""``/threads/{thread_id}/mcp``: the built-in agent's tool layer as an MCP server over the
thread's workspace (plumbing, and ``/mcp`` for assistants, in ``api.mcp_runs``).

The tools are the adapter's own :class:`~agent.tools.ToolSpec` objects, the ones the agent calls:
the same argument schemas (``inputSchema``), path checks, sandbox and program allow-list. Each
tool's read-only flag gives its annotations (``readOnlyHint`` = ``idempotentHint`` = read_only,
``destructiveHint`` = not read_only).

- Access: the whole endpoint answers 404 for a thread the caller cannot read (another tenant's
  thread is not found, as on the rest of the API); a call needs ``update`` access to the thread.
- A call is validated and executed by ``execute_tool`` with the idempotency key
  ``{thread_id}:mcp-<uuid>``; its result is text plus ``structuredContent`` ``{"ok", "output"}``.
  A bad call (a path outside the workspace, a program not allowed, invalid arguments, an unknown
  tool) is a result with ``isError: true`` and the tool's message, never a protocol error.
- Every executed call is audited (``GET /threads/{id}/audit``): kind ``tool``, no run, the
  caller's identity as actor (``anonymous`` without authentication), ``detail.via`` ``mcp``.
- Approval policy: the deployment's rules with no task rules (``/info``'s ``effective``). A
  ``deny`` tool is an ``isError`` result. An ``ask`` tool is *referred*: an ``isError`` result
  saying the call needs a human decision and how to get one: start a run of the agent on the
  thread (``POST /threads/{id}/runs``, or the ``agent`` tool of ``/mcp``), whose call is then
  asked through the approvals API and page, decided once, and audited with its decider. The MCP
  call itself never waits and never runs an ``ask`` tool.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from starlette.types import Scope

from agent.tools import ToolContext, ToolSpec, ensure_workspace, execute_tool
from api.adapters import ToolRecord
from api.builtin_agent import BUILTIN_ASSISTANT
from api.builtin_agent.adapter import BuiltinAgent
from api.errors import ApiError
from api.mcp_runs import Context, acting_as, error, result
from api.service import Service
from api.store import audit

VIA = "mcp"


def agent_of(svc: Service) -> BuiltinAgent:
    adapter = svc.runtime.adapter(BUILTIN_ASSISTANT)
    assert isinstance(adapter, BuiltinAgent)
    return adapter


def thread_of(scope: Scope) -> str:
    return str(scope["path_params"]["thread_id"])


async def precheck(svc: Service, scope: Scope) -> None:
    """Before the SDK sees the request: the thread must be one the caller can read."""
    await svc.thread(thread_of(scope), "read")


def describe(tool: ToolSpec) -> types.Tool:
    schema = tool.args_schema.model_json_schema()
    schema.pop("title", None)
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=not tool.read_only,
            idempotent_hint=tool.read_only,
        ),
    )


async def list_tools(ctx: Context, params: Any) -> types.ListToolsResult:
    with acting_as(ctx) as (svc, _):
        return types.ListToolsResult(tools=[describe(t) for t in agent_of(svc).tools.values()])


def refused(tool: ToolSpec, rule: str, thread_id: str) -> str | None:
    """The message for a call the policy does not let run here, or None when it runs."""
    if rule == "deny":
        return (
            f"{tool.name} is denied by this server's approval policy "
            "(THREADLINE_APPROVAL_POLICY; GET /info shows it). Use another tool."
        )
    if rule == "ask":
        return (
            f"{tool.name} needs a human decision under this server's approval policy, and an "
            "MCP call does not wait for one. To get it, start a run of the agent on this thread "
            f"(POST /threads/{thread_id}/runs with assistant_id 'agent', or the 'agent' tool of "
            "the server's /mcp endpoint): the agent's call is asked through the approvals API "
            f"(GET/POST /threads/{thread_id}/approvals, or the web page), runs once approved, "
            "and the audit log names who decided. Read-only tools run here without a question."
        )
    return None


async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> Any:
    with acting_as(ctx) as (svc, scope):
        thread_id = thread_of(scope)
        try:
            await svc.thread(thread_id, "update")
        except ApiError as err:
            return error(err.message)
        agent = agent_of(svc)
        tool = agent.tools.get(params.name)
        if tool is None:
            return error(f"No tool {params.name!r}. Tools: {', '.join(agent.tools)}.")
        rule = agent.policy.decide(tool.name, read_only=tool.read_only).rule
        message = refused(tool, rule, thread_id)
        if message is not None:
            return error(message)
        call_id = f"{VIA}-{uuid.uuid4().hex}"
        workspace = ensure_workspace(svc.runtime.settings.data_dir, thread_id)
        args = dict(params.arguments or {})
        started = time.monotonic()
        out = await execute_tool(tool, ToolContext(workspace, f"{thread_id}:{call_id}"), args)
        record = ToolRecord(
            tool=tool.name,
            tool_call_id=call_id,
            args=args,
            ok=out.ok,
            duration=round(time.monotonic() - started, 3),
            output=out.content,
            result=out.content,
        )
        async with svc.pool.connection() as conn:
            await audit.record_direct_tool(
                conn, thread_id=thread_id, record=record, actor=svc.actor(), via=VIA
            )
    return result({"ok": out.ok, "output": out.content}, error=not out.ok, text=out.content)


def thread_server() -> Server[Any]:
    """The ``/threads/{thread_id}/mcp`` server: the agent's tools over the thread's workspace."""
    return Server(
        "threadline-workspace",
        instructions="The threadline agent's tools over one thread's workspace. Tools that the "
        "approval policy asks about are referred to a run of the agent (see their error).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
