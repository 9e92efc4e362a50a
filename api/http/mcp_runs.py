"""MCP over Streamable HTTP, on the official ``mcp`` SDK: the plumbing both endpoints share, and
``/mcp``, where each assistant is a tool that starts a durable run.

- Every MCP request passes the app's middleware first (CORS, the Guard's Host/Origin checks and
  authentication, the body limit): the SDK's own DNS-rebinding check is off, the Guard does it.
  The Guard's caller is put into the request's scope (:data:`CALLER_KEY`), since the SDK may run a
  handler in another task than the request's; ``acting_as`` (``api.http.mcp_context``, with the
  result helpers) makes it the caller again there.
- The session managers are stateless (no ``Mcp-Session-Id``: any replica serves any request) and
  run by the app's lifespan (:func:`serve`). Clients of the 2026-07-28 revision and of the older,
  ``initialize``-handshake ones (2024-11-05 to 2025-11-25) are both served.
- ``/mcp``: a tool per assistant (``runtime.graphs``). A call creates a run through the
  :class:`~api.runs.service.Service` (so tenancy, the run checks and the approval policy apply as on
  ``POST /threads/{id}/runs``) on a new thread or the ``thread_id`` named, waits for it to end and
  returns ``{thread_id, run_id, status, values, interrupts}``. The run is an ordinary durable
  run: an interrupted one is answered through the approvals API (or a call with ``command``:
  ``{"resume": {interrupt_id: answer}}`` answers any pending interrupt of the caller's thread,
  whichever door raised it, once, audited with ``detail.via`` ``mcp``), followed with
  ``GET /threads/{id}/runs/{run_id}``, and survives a restart of the server.
- Tasks and ``InputRequiredResult`` (``api.http.mcp_tasks``): a call whose request declares the
  ``io.modelcontextprotocol/tasks`` extension is answered at once with a task of its run (polled
  with ``tasks/get``, its interrupts answered with ``tasks/update``, ``tasks/cancel``); one that
  declares elicitation instead waits as before, and when the run stopped at interrupts gets an
  ``InputRequiredResult`` asking for their answers — its retry resumes the run with them and
  waits for that run in turn.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from api.auth.context import caller
from api.contract.runs import RunCreate
from api.http import mcp_tasks
from api.http.mcp_context import CALLER_KEY, Context, acting_as, error
from api.http.mcp_task_state import TaskRef, call_of, load, run_outcome
from api.platform.errors import ApiError
from api.runs.service import Service

Precheck = Callable[[Service, Scope], Awaitable[None]]


class McpEndpoint:
    """The ASGI app of one MCP endpoint: the session manager ``name`` of :func:`serve`, after an
    optional ``precheck`` (an :class:`~api.platform.errors.ApiError` is the HTTP answer, as
    elsewhere)."""

    def __init__(self, name: str, precheck: Precheck | None = None) -> None:
        self.name = name
        self.precheck = precheck

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope["app"].state
        scope[CALLER_KEY] = caller()
        if self.precheck is not None:
            try:
                await self.precheck(state.service, scope)
            except ApiError as err:
                await JSONResponse({"detail": err.message}, err.status)(scope, receive, send)
                return
        manager: StreamableHTTPSessionManager = state.mcp_managers[self.name]
        await manager.handle_request(scope, receive, send)


@asynccontextmanager
async def serve(app: FastAPI, servers: Mapping[str, Server[Any]]) -> AsyncIterator[None]:
    """Run a stateless session manager for each server while the app runs (its lifespan)."""
    managers = {
        name: StreamableHTTPSessionManager(
            app=server,
            stateless=True,
            # Host and Origin are the Guard's (THREADLINE_ALLOWED_HOSTS / _CORS_ORIGINS).
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        for name, server in servers.items()
    }
    async with AsyncExitStack() as stack:
        for manager in managers.values():
            await stack.enter_async_context(manager.run())
        app.state.mcp_managers = managers
        yield


# -- /mcp: assistants as tools ----------------------------------------------------------------

RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {
            "description": "The run's input, as for POST /threads/{id}/runs (the built-in "
            'agent: {"task": {"name": ..., "params": {...}}} or {"messages": [...]}); '
            "null continues the thread."
        },
        "thread_id": {
            "type": "string",
            "description": "Run on this thread (yours); left out, a new thread is created.",
        },
        "command": {
            "type": "object",
            "description": 'Resume an interrupted thread, e.g. {"resume": {...}} answering '
            "its pending interrupts (the approvals API does the same).",
        },
    },
    "additionalProperties": False,
}


async def list_assistants(ctx: Context, params: Any) -> types.ListToolsResult:
    with acting_as(ctx) as (svc, _):
        names = sorted(svc.runtime.graphs)
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=name,
                description=f"Start a durable run of the assistant {name!r} on a thread (new, or "
                "thread_id) and wait for it to end: returns thread_id, run_id, status (success, "
                "error, interrupted, ...), the thread's values and pending interrupts. Follow, "
                "resume and approve the run through threadline's HTTP API.",
                input_schema=RUN_SCHEMA,
                annotations=types.ToolAnnotations(
                    read_only_hint=False, destructive_hint=True, idempotent_hint=False
                ),
            )
            for name in names
        ]
    )


async def finished(svc: Service, ctx: Context, thread_id: str, run: dict[str, Any]) -> Any:
    """Wait for an assistant's run to end: its outcome, or (the client can elicit, the run
    stopped at interrupts) an ``InputRequiredResult`` asking for their answers."""
    await svc.wait_for_end(str(run["run_id"]))
    if mcp_tasks.can_elicit(ctx):
        task = await load(svc, TaskRef(thread_id, str(run["run_id"])))
        if task.status == "input_required":
            return mcp_tasks.input_required(task)
    return await run_outcome(svc, thread_id, await svc.refreshed_run(thread_id, str(run["run_id"])))


async def call_assistant(ctx: Context, params: types.CallToolRequestParams) -> Any:
    args = dict(params.arguments or {})
    with acting_as(ctx) as (svc, _):
        if params.name not in svc.runtime.graphs:
            return error(
                f"No assistant {params.name!r}. Known: {', '.join(sorted(svc.runtime.graphs))}."
            )
        if params.input_responses is not None or params.request_state is not None:
            answered = await mcp_tasks.answer_retry(
                svc,
                ctx,
                params,
                lambda run: call_of(run) is None and run["graph_id"] == params.name,
            )
            if not isinstance(answered, tuple):
                return answered
            try:
                return await finished(svc, ctx, answered[0].thread_id, answered[1])
            except ApiError as err:
                return error(err.message)
        thread_id = args.pop("thread_id", None)
        if thread_id is not None and not isinstance(thread_id, str):
            return error("thread_id is a string: the id of one of your threads.")
        extra = sorted(set(args) - {"input", "command"})
        if extra:
            return error(f"Unknown argument(s) {extra}: send input, command and/or thread_id.")
        try:
            body = RunCreate.model_validate(
                {
                    "assistant_id": params.name,
                    **args,
                    "if_not_exists": "reject" if thread_id else "create",
                }
            )
            thread_id = thread_id or str(uuid.uuid4())
            run = await svc.create_run(thread_id, body)
            if mcp_tasks.wants_tasks(ctx):
                return await mcp_tasks.created(svc, thread_id, run)
            return await finished(svc, ctx, thread_id, run)
        except ValidationError as err:
            return error(f"Invalid arguments: {err.errors(include_url=False)}")
        except ApiError as err:
            return error(err.message)


def assistants_server() -> Server[Any]:
    """The ``/mcp`` server: one tool per assistant."""
    server: Server[Any] = Server(
        "threadline",
        instructions="Each tool runs an assistant as a durable threadline run.",
        on_list_tools=list_assistants,
        on_call_tool=call_assistant,
    )
    return mcp_tasks.serve_tasks(server)
