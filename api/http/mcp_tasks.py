"""The ``io.modelcontextprotocol/tasks`` extension (MCP 2026-07-28) and ``InputRequiredResult``
for calls that wait for an approval, on both MCP endpoints (the state of a task:
``api.http.mcp_task_state``).

- Who gets what: a ``tools/call`` whose request declares the extension in its per-request client
  capabilities (2026-07-28 only) may be answered at once with a task (:func:`created`,
  ``resultType: "task"``); one that declares elicitation instead gets an ``InputRequiredResult``
  (:func:`input_required`) whose ``requestState`` is the task id, and its retry with
  ``inputResponses`` is answered by :func:`answer_retry`; anyone else gets what they got before.
- ``tasks/get`` returns the task (``inputRequests`` while ``input_required``, the call's result
  once ``completed``, the JSON-RPC ``error`` when ``failed``). ``tasks/update`` answers
  outstanding input requests (:func:`answer`): one resume run through the service, under the
  caller's name and the door ``mcp`` (audit ``detail.via``), recorded exactly once — a key that is
  not outstanding (answered already, here or through another door, or never asked) is an error
  naming the outstanding ones, and nothing is answered. ``tasks/cancel`` cancels the task's
  queued or running runs; a task waiting for an approval has it rejected ("Cancelled over MCP")
  by a run marked :data:`~api.http.mcp_task_state.CANCEL_MARK`, so the task reads ``cancelled``;
  an interrupt that is not an approval cannot be cancelled (answer it).
- The three methods need the extension declared on their request (-32021 otherwise); a bad or
  unknown ``taskId``, another tenant's task, malformed responses: -32602 with what to send.
"""

from __future__ import annotations

import contextlib
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from api.contract.runs import RunCreate
from api.http.mcp_context import Context, acting_as, error, request_scope
from api.http.mcp_task_state import (
    CANCEL_MARK,
    POLL_INTERVAL_MS,
    TASKS,
    TERMINAL,
    Task,
    TaskError,
    TaskRef,
    input_request,
    load,
    parse_task_id,
    resume_value,
)
from api.platform.errors import ApiError, Conflict
from api.runs.service import Service

MISSING_CAPABILITY = -32021


class TaskParams(types.RequestParams):
    task_id: Any = None


class UpdateParams(TaskParams):
    input_responses: Any = None


def capabilities(ctx: Context) -> types.ClientCapabilities | None:
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None  # tasks and InputRequiredResult are 2026-07-28 shapes
    caps: types.ClientCapabilities | None = ctx.session.client_capabilities
    return caps


def wants_tasks(ctx: Context) -> bool:
    caps = capabilities(ctx)
    return caps is not None and TASKS in (caps.extensions or {})


def can_elicit(ctx: Context) -> bool:
    caps = capabilities(ctx)
    return caps is not None and caps.elicitation is not None


def endpoint_thread(ctx: Context) -> str | None:
    """The thread of ``/threads/{thread_id}/mcp`` (None on ``/mcp``)."""
    thread = (request_scope(ctx).get("path_params") or {}).get("thread_id")
    return str(thread) if thread is not None else None


def task_body(task: Task) -> dict[str, Any]:
    body: dict[str, Any] = {
        "taskId": task.ref.task_id,
        "status": task.status,
        "statusMessage": task.message,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.updated_at,
        "ttlMs": None,  # kept as long as its thread
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if task.status == "input_required":
        body["inputRequests"] = {
            i.id: input_request(i).model_dump(by_alias=True, mode="json", exclude_none=True)
            for i in task.interrupts
        }
    elif task.status == "completed":
        body["result"] = task.outcome.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif task.status == "failed":
        body["error"] = task.error
    return body


async def created(svc: Service, thread_id: str, run: dict[str, Any]) -> dict[str, Any]:
    """The ``CreateTaskResult`` of a call that started ``run`` (durable already: its row)."""
    task = await load(svc, TaskRef(thread_id, str(run["run_id"])))
    return {"resultType": "task", **task_body(task)}


def input_required(task: Task) -> types.InputRequiredResult:
    return types.InputRequiredResult(
        input_requests={i.id: input_request(i) for i in task.interrupts},
        request_state=task.ref.task_id,
    )


async def answer(svc: Service, ref: TaskRef, responses: Any) -> dict[str, Any] | None:
    """Resume the task's run with the answers to its outstanding input requests, once; the
    resume run, or None when every response was ``cancel`` (no decision)."""
    if not isinstance(responses, dict) or not responses:
        raise TaskError(
            "inputResponses is an object: each key an outstanding input request's key (tasks/get "
            "shows them), each value its elicitation result."
        )
    task = await load(svc, ref, "update")
    if task.status != "input_required":
        raise TaskError(f"Task {ref.task_id!r} is {task.status}: it waits for no input.")
    pending = {i.id: i for i in task.interrupts}
    unknown = sorted(set(responses) - set(pending))
    if unknown:
        raise TaskError(
            f"No outstanding input request {unknown} (answered already, over MCP or another "
            f"door, or never asked); nothing was answered. Outstanding: {sorted(pending)}."
        )
    resume = {}
    for key, response in responses.items():
        value = resume_value(key, pending[key].value, response)
        if value is not None:
            resume[key] = value
    return await resume_with(svc, ref, resume) if resume else None


async def resume_with(
    svc: Service, ref: TaskRef, resume: dict[str, Any], metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    try:
        body = RunCreate(
            assistant_id=await svc.latest_assistant(ref.thread_id),
            command={"resume": resume},
            metadata=metadata or {},
        )
        return await svc.create_run(ref.thread_id, body)
    except ApiError as err:
        raise TaskError(err.message) from None


async def cancel(svc: Service, ref: TaskRef) -> None:
    task = await load(svc, ref, "update")
    if task.status in TERMINAL:
        raise TaskError(f"Task {ref.task_id!r} is {task.status} already: nothing to cancel.")
    for run_id in task.active:
        with contextlib.suppress(Conflict):  # it ended meanwhile: the task reads how
            await svc.cancel(ref.thread_id, run_id)
    if task.status != "input_required":
        return
    resume = {}
    for interrupt in task.interrupts:
        reject = {"action": "accept", "content": {"decision": "reject"}}
        try:
            resume[interrupt.id] = resume_value(interrupt.id, interrupt.value, reject)
        except TaskError:
            raise TaskError(
                f"Task {ref.task_id!r} waits on an interrupt that is not an approval "
                f"({interrupt.id}); it cannot be cancelled over MCP: answer it with tasks/update."
            ) from None
        for decision in resume[interrupt.id]["decisions"]:
            decision["message"] = "Cancelled over MCP (tasks/cancel)."
    await resume_with(svc, ref, resume, {CANCEL_MARK: ref.task_id})


async def answer_retry(
    svc: Service, ctx: Context, params: types.CallToolRequestParams, same_call: Any
) -> tuple[TaskRef, dict[str, Any]] | Any:
    """A ``tools/call`` retried with ``inputResponses``: answers the task its ``requestState``
    names (a task of this endpoint whose call ``same_call(run)`` recognises); the task and its
    resume run, or an ``isError`` result that says what went wrong."""
    if params.request_state is None or not params.input_responses:
        return error(
            "A retry answers an InputRequiredResult: send its requestState back with "
            "inputResponses, one for each of its input requests."
        )
    try:
        ref = parse_task_id(params.request_state, endpoint_thread(ctx))
        if not same_call(await svc.run(ref.thread_id, ref.run_id, "update")):
            return error(f"The requestState is not one of a call of {params.name!r}.")
        responses = {
            key: response.model_dump(by_alias=True, mode="json", exclude_none=True)
            for key, response in params.input_responses.items()
        }
        resumed = await answer(svc, ref, responses)
    except TaskError as err:
        return error(err.message)
    except ApiError as err:
        return error(f"The requestState names no call of yours: {err.message}")
    if resumed is None:
        return error(
            "No decision was given (every response was cancel): the request still waits; "
            f"answer it (accept or decline), or on the thread's approvals ({ref.thread_id})."
        )
    return ref, resumed


def require_tasks(ctx: Context) -> None:
    if not wants_tasks(ctx):
        raise MCPError(
            code=MISSING_CAPABILITY,
            message=f"Missing required client capability: declare the {TASKS} extension in "
            "this request's client capabilities (MCP 2026-07-28).",
            data={"requiredCapabilities": {"extensions": {TASKS: {}}}},
        )


def invalid(err: TaskError) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=err.message)


async def get_task(ctx: Context, params: TaskParams) -> dict[str, Any]:
    require_tasks(ctx)
    with acting_as(ctx) as (svc, _):
        try:
            return task_body(await load(svc, parse_task_id(params.task_id, endpoint_thread(ctx))))
        except TaskError as err:
            raise invalid(err) from None


async def update_task(ctx: Context, params: UpdateParams) -> dict[str, Any]:
    require_tasks(ctx)
    with acting_as(ctx) as (svc, _):
        try:
            await answer(
                svc, parse_task_id(params.task_id, endpoint_thread(ctx)), params.input_responses
            )
        except TaskError as err:
            raise invalid(err) from None
    return {}


async def cancel_task(ctx: Context, params: TaskParams) -> dict[str, Any]:
    require_tasks(ctx)
    with acting_as(ctx) as (svc, _):
        try:
            await cancel(svc, parse_task_id(params.task_id, endpoint_thread(ctx)))
        except TaskError as err:
            raise invalid(err) from None
    return {}


def serve_tasks(server: Server[Any]) -> Server[Any]:
    """Add the extension's methods to ``server`` and advertise it."""
    server.add_request_handler("tasks/get", TaskParams, get_task)
    server.add_request_handler("tasks/update", UpdateParams, update_task)
    server.add_request_handler("tasks/cancel", TaskParams, cancel_task)
    server.extensions[TASKS] = {}
    return server
