"""``/threads/{thread_id}/mcp``: the built-in agent's tool layer as an MCP server over the
thread's workspace (plumbing, and ``/mcp`` for assistants, in ``api.http.mcp_runs`` and
``api.http.mcp_context``; tasks in ``api.http.mcp_tasks``).

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
- Every call is audited (``GET /threads/{id}/audit``) under the caller's identity
  (``anonymous`` without authentication): one run directly is kind ``tool`` with no run and
  ``detail.via`` ``mcp``; a denied one the same with ``ok`` false.
- Approval policy: the deployment's rules with no task rules (``/info``'s ``effective``). A
  ``deny`` tool is an ``isError`` result. An ``ask`` tool *waits*: the call becomes a durable run
  of the agent on the thread with the input ``{"call": ...}`` (no model), so it is asked through
  the same approvals API and page as the agent's calls, decided once (the decision audited with
  its decider), run once when approved (the execution audited under the caller's name). The MCP
  call returns the tool's result when it comes within ``WAIT_SECONDS``; otherwise an ``isError``
  result says how to decide (the call still runs once when approved; its result is then in the
  thread's messages and audit log). A rejection is an ``isError`` result with the human's message.
- Tasks and ``InputRequiredResult`` (``api.http.mcp_tasks``): an ``ask`` call whose request
  declares the ``io.modelcontextprotocol/tasks`` extension is answered at once with a task of
  that run (``tasks/get`` shows the approval as an input request ``{"decision": "approve" |
  "reject", "message"?}``, ``tasks/update`` decides it, ``completed`` carries the result the
  call returns without tasks, ``tasks/cancel`` rejects a pending approval); one that declares
  elicitation gets an ``InputRequiredResult`` with that input request once the approval is asked,
  and its retry decides it (once, audited ``via`` ``mcp``) and waits for the result as above.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from starlette.types import Scope

from agent.tools import ToolContext, ToolSpec, ensure_workspace, execute_tool
from api.builtin_agent import BUILTIN_ASSISTANT
from api.builtin_agent.adapter import BuiltinAgent
from api.contract.runs import RunCreate
from api.http import mcp_tasks
from api.http.mcp_context import Context, acting_as, error, result
from api.http.mcp_task_state import TaskRef, call_of, load, tool_outcome
from api.platform.errors import ApiError
from api.runs.service import Service
from api.store import audit
from api.store.audit import ToolRecord

VIA = "mcp"
WAIT_SECONDS = 120.0
"""How long an ``ask`` call waits for its decision and result before it answers how to give one."""
POLL_SECONDS = 0.25


def agent_of(svc: Service) -> BuiltinAgent:
    adapter = svc.runtime.adapter(BUILTIN_ASSISTANT)
    assert isinstance(adapter, BuiltinAgent)
    return adapter


def thread_of(scope: Scope) -> str:
    return str(scope["path_params"]["thread_id"])


async def precheck(svc: Service, scope: Scope) -> None:
    """Before the SDK sees the request: the thread must be one the caller can read."""
    await svc.thread(thread_of(scope), "read", values=False)


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


def denied(tool: ToolSpec) -> str:
    return (
        f"{tool.name} is denied by this server's approval policy "
        "(THREADLINE_APPROVAL_POLICY; GET /info shows it). Use another tool."
    )


async def run_asked(
    svc: Service, ctx: Context, thread_id: str, tool: ToolSpec, args: dict[str, Any]
) -> Any:
    """An ``ask`` call: a run of the agent on the thread makes it (input ``{"call": ...}``), so it
    is asked through the approvals API and page like the agent's own calls, runs once when
    approved, and is audited. A task-capable client gets the task of that run at once; one that
    can elicit gets the approval as an ``InputRequiredResult``; otherwise this waits."""
    call_id = f"{VIA}-{uuid.uuid4().hex}"
    call = {"name": tool.name, "args": args, "id": call_id}
    try:
        run = await svc.create_run(
            thread_id, RunCreate(assistant_id=BUILTIN_ASSISTANT, input={"call": call})
        )
    except ApiError as err:
        return error(f"{tool.name} could not be asked about: {err.message}")
    if mcp_tasks.wants_tasks(ctx):
        return await mcp_tasks.created(svc, thread_id, run)
    if mcp_tasks.can_elicit(ctx):
        # No model: the run soon asks (or runs the call, or queues behind a busy worker pool).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(svc.wait_for_end(run["run_id"]), WAIT_SECONDS)
        task = await load(svc, TaskRef(thread_id, run["run_id"]))
        if task.status == "input_required":
            return mcp_tasks.input_required(task)
    return await call_result(svc, thread_id, tool.name, run["run_id"], call_id)


async def call_result(svc: Service, thread_id: str, name: str, run_id: str, call_id: str) -> Any:
    """The call's result once it has one, within :data:`WAIT_SECONDS`; else how to decide."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = tool_outcome(await svc.state(thread_id, BUILTIN_ASSISTANT), call_id, run_id)
        if found is not None:
            return found
        if (await svc.refreshed_run(thread_id, run_id))["status"] == "error":
            return error(f"The run that makes the call failed (run {run_id}).")
        await asyncio.sleep(POLL_SECONDS)
    return error(
        f"{name} is waiting for a human decision (the approval policy asks about it): "
        f"approve, edit or reject it with POST /threads/{thread_id}/approvals (GET "
        f"/threads/{thread_id}/state shows the request) or on the web page. It runs once, when "
        f"approved; its result becomes the thread's tool message {call_id} and is in GET "
        f"/threads/{thread_id}/audit."
    )


async def retried(svc: Service, ctx: Context, thread_id: str, params: Any) -> Any:
    """A call retried with the answer to its ``InputRequiredResult``: decide, then wait."""

    def same_call(run: dict[str, Any]) -> bool:
        call = call_of(run)
        return call is not None and call.get("name") == params.name

    answered = await mcp_tasks.answer_retry(svc, ctx, params, same_call)
    if not isinstance(answered, tuple):
        return answered
    ref = answered[0]
    call = call_of(await svc.run(thread_id, ref.run_id))
    assert call is not None
    return await call_result(svc, thread_id, params.name, ref.run_id, call["id"])


async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> Any:
    with acting_as(ctx) as (svc, scope):
        thread_id = thread_of(scope)
        try:
            await svc.thread(thread_id, "update", values=False)
        except ApiError as err:
            return error(err.message)
        agent = agent_of(svc)
        if params.input_responses is not None or params.request_state is not None:
            return await retried(svc, ctx, thread_id, params)
        tool = agent.tools.get(params.name)
        if tool is None:
            return error(f"No tool {params.name!r}. Tools: {', '.join(agent.tools)}.")
        rule = agent.policy.decide(tool.name, read_only=tool.read_only).rule
        args = dict(params.arguments or {})
        if rule == "ask":
            return await run_asked(svc, ctx, thread_id, tool, args)
        call_id = f"{VIA}-{uuid.uuid4().hex}"
        if rule != "auto":  # deny (and anything unreadable): refused, and audited as refused
            refusal = denied(tool)
            record = ToolRecord(tool.name, call_id, args, False, 0.0, refusal, None)
            async with svc.pool.connection() as conn:
                await audit.record_direct_tool(
                    conn, thread_id=thread_id, record=record, actor=svc.actor(), via=VIA
                )
            return error(refusal)
        workspace = ensure_workspace(svc.runtime.settings.data_dir, thread_id)
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
    server: Server[Any] = Server(
        "threadline-workspace",
        instructions="The threadline agent's tools over one thread's workspace. A tool the "
        "approval policy asks about waits for a human's decision (the thread's approvals).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    return mcp_tasks.serve_tasks(server)
