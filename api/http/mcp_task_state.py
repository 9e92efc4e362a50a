"""An MCP task (the ``io.modelcontextprotocol/tasks`` extension) as threadline keeps it: nothing
but a thread and the run an MCP ``tools/call`` started, read back from the database each time.

- The task id is ``{thread_id}:{run_id}`` (:class:`TaskRef`): the run's id is a random UUID and
  every use checks the caller's access to the thread (another tenant's task is not found), so
  the id carries no secret and survives a restart or a move to another replica.
- A task is the call's run and the thread's runs created after it (its resumes). Its status
  (:func:`load`): ``completed`` once it has its result — for a call of the built-in agent's tool
  (a run with the input ``{"call": ...}``, from ``/threads/{id}/mcp``) the thread's tool message
  of that call, as the call returns it without tasks; for an assistant run (``/mcp``) the run's
  outcome, as ``/mcp`` returns it — ``working`` while one of those runs is queued or running,
  ``input_required`` while an interrupt waits (an approval asking about the call, or any
  interrupt of an assistant's thread), ``cancelled`` when a run of it was cancelled or
  ``tasks/cancel`` rejected its approval (the rejecting run is marked :data:`CANCEL_MARK`), and
  ``failed`` when a run of it failed.
- An input request is an ``elicitation/create`` form keyed by the interrupt's id
  (:func:`input_request`): an approval asks for ``{"decision": "approve" | "reject",
  "message"?}`` (one decision for every call the interrupt asks about); any other interrupt asks
  for ``{"resume": "<JSON>"}``, the resume value. :func:`resume_value` maps a response to the
  resume value (``decline`` rejects an approval; ``cancel`` is no decision).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import mcp_types as types
from langchain_core.messages import ToolMessage
from pydantic import ValidationError

from api.contract import hitl
from api.http.mcp_context import result
from api.platform.errors import ApiError
from api.platform.serde import to_jsonable
from api.runs.service import Service
from api.store import runs

TASKS = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 500
CANCEL_MARK = "mcp_task_cancelled"
"""Run metadata key of the run by which ``tasks/cancel`` rejected a task's approval."""
RECENT_RUNS = 100
CALL_ID_PREFIX = "mcp-"
TERMINAL = ("completed", "failed", "cancelled")
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "enum": ["approve", "reject"],
            "description": "approve: the call(s) run exactly as asked; reject: they do not run.",
        },
        "message": {"type": "string", "description": "Why (optional; sent with a rejection)."},
    },
    "required": ["decision"],
}
RESUME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "resume": {"type": "string", "description": "The value that resumes the run, as JSON."}
    },
    "required": ["resume"],
}
ID_SHAPE = 'a taskId is the "<thread_id>:<run_id>" a tools/call returned as its task'


class TaskError(Exception):
    """What is wrong with a task request, said so the client knows what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class TaskRef:
    thread_id: str
    run_id: str

    @property
    def task_id(self) -> str:
        return f"{self.thread_id}:{self.run_id}"


def parse_task_id(value: Any, thread_id: str | None = None) -> TaskRef:
    """The task a ``taskId`` names; ``thread_id``: the endpoint's thread, the only one whose
    tasks it serves."""
    if not isinstance(value, str) or not value:
        raise TaskError(f"taskId is missing or not a string: {ID_SHAPE}.")
    thread, _, run = value.rpartition(":")
    try:
        run_id = str(uuid.UUID(run))
    except ValueError:
        raise TaskError(f"No task {value[:200]!r}: {ID_SHAPE}.") from None
    if not thread or (thread_id is not None and thread != thread_id):
        raise TaskError(f"No task {value[:200]!r} on this endpoint: {ID_SHAPE}.")
    return TaskRef(thread, run_id)


@dataclass
class Task:
    ref: TaskRef
    status: str
    message: str
    created_at: str
    updated_at: str
    interrupts: list[Any] = field(default_factory=list)
    """The pending interrupts it waits on (``input_required``)."""
    outcome: Any = None
    """The ``CallToolResult`` (``completed``)."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error (``failed``)."""
    active: list[str] = field(default_factory=list)
    """Its queued or running runs."""


def call_of(run: dict[str, Any]) -> dict[str, Any] | None:
    """The built-in agent's tool call an MCP call made this run for (``/threads/{id}/mcp`` gives
    it an id ``mcp-<hex>``), if it is one."""
    given = (run.get("kwargs") or {}).get("input")
    call = given.get("call") if isinstance(given, dict) else None
    if isinstance(call, dict) and str(call.get("id", "")).startswith(CALL_ID_PREFIX):
        return call
    return None


def tool_outcome(state: Any, call_id: str, run_id: str) -> Any:
    """The call's result once its tool message is on the thread, else None."""
    for message in (state.values or {}).get("messages") or []:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            ok = message.status != "error"
            text = str(message.content)
            out = {"ok": ok, "output": text, "run_id": run_id, "tool_call_id": call_id}
            return result(out, error=not ok, text=text)
    return None


async def run_outcome(svc: Service, thread_id: str, run: dict[str, Any]) -> Any:
    """What ``/mcp`` returns for an assistant's run that ended."""
    values = await svc.final_values(thread_id, run)
    interrupts = values.get("__interrupt__", []) if isinstance(values, dict) else []
    out = {
        "thread_id": thread_id,
        "run_id": str(run["run_id"]),
        "status": run["status"],
        "error": run.get("error"),
        "values": values,
        "interrupts": interrupts,
    }
    return result(to_jsonable(out), error=run["status"] == "error")


async def task_runs(svc: Service, origin: dict[str, Any]) -> list[dict[str, Any]]:
    """The call's run and the thread's runs since, newest first."""
    start = datetime.fromisoformat(origin["created_at"])
    async with svc.pool.connection() as conn:
        recent = await runs.list_for_thread(
            conn, origin["thread_id"], limit=RECENT_RUNS, offset=0, status=None
        )
    since = [r for r in recent if datetime.fromisoformat(r["created_at"]) >= start]
    return since or [origin]


async def load(svc: Service, ref: TaskRef, action: str = "read") -> Task:
    """The task's current state, from its runs and its thread (TaskError: not found)."""
    try:
        origin = await svc.run(ref.thread_id, ref.run_id, action)
    except ApiError as err:
        if err.status == 404:
            raise TaskError(f"No task {ref.task_id!r} (unknown, or not yours).") from None
        raise TaskError(err.message) from None
    since = await task_runs(svc, origin)
    latest = since[0]
    state = await svc.state(ref.thread_id, origin["graph_id"])
    active = [r["run_id"] for r in since if r["status"] in ("pending", "running")]
    failed = latest if latest["status"] in ("error", "timeout") else None
    marked = any((r["metadata"] or {}).get(CANCEL_MARK) == ref.task_id for r in since)
    task = Task(ref, "working", "", origin["created_at"], latest["updated_at"], active=active)
    call = call_of(origin)
    if call is not None:
        outcome = tool_outcome(state, call["id"], ref.run_id)
        waiting = [
            i
            for i in state.interrupts
            if isinstance(i.value, dict) and call["id"] in (i.value.get("tool_call_ids") or [])
        ]
    else:
        outcome = None
        waiting = list(state.interrupts)
    if marked:
        task.status, task.message = "cancelled", "Cancelled: tasks/cancel rejected its approval."
    elif outcome is not None:
        task.status, task.outcome, task.message = "completed", outcome, "The call is done."
    elif latest["status"] == "interrupted":
        task.status, task.message = "cancelled", f"Run {latest['run_id']} was cancelled."
    elif active:
        task.message = f"Run {active[0]} is queued or running."
    elif failed is not None:
        error = f"Run {failed['run_id']} ended {failed['status']}: {failed.get('error')}"
        task.status, task.message = "failed", error
        task.error = {"code": types.INTERNAL_ERROR, "message": error}
    elif waiting:
        task.status, task.interrupts = "input_required", waiting
        task.message = "Waiting for a decision: answer its input requests with tasks/update."
    elif call is None:
        task.status, task.message = "completed", f"Run {latest['run_id']} ended."
        task.outcome = await run_outcome(svc, ref.thread_id, latest)
    else:
        task.status, task.message = "failed", "The call has no result and waits for nothing."
        task.error = {"code": types.INTERNAL_ERROR, "message": task.message}
    return task


def input_request(interrupt: Any) -> types.ElicitRequest:
    """The elicitation that asks for an interrupt's answer."""
    value = interrupt.value
    if hitl.is_request(value):
        asked = "; ".join(f"{name} {json.dumps(args)}" for name, args in hitl.calls(value))
        why = "; ".join(str(a.get("description", "")) for a in hitl.actions(value))
        message, schema = f"Approve or reject: {asked} ({why}).", DECISION_SCHEMA
    else:
        shown = json.dumps(to_jsonable(value), default=str)[:2000]
        message = f"The run waits for input: {shown}. Answer with the resume value as JSON."
        schema = RESUME_SCHEMA
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


RESPONSE_SHAPE = (
    'an input response is an elicitation result: {"action": "accept", "content": '
    '{"decision": "approve" | "reject", "message"?: "..."}} for an approval ({"action": '
    '"decline"} rejects it), {"action": "accept", "content": {"resume": "<JSON>"}} for any '
    "other interrupt"
)


def resume_value(key: str, interrupt_value: Any, response: Any) -> Any:
    """The resume value an input response gives an interrupt; None: no decision (``cancel``)."""
    try:
        answer = types.ElicitResult.model_validate(response, by_name=False)
    except ValidationError:
        raise TaskError(f"inputResponses[{key!r}] is not valid: {RESPONSE_SHAPE}.") from None
    if answer.action == "cancel":
        return None
    content = answer.content or {}
    if hitl.is_request(interrupt_value):
        count = hitl.count(interrupt_value)
        if answer.action == "decline":
            return hitl.reject_all(interrupt_value, "Declined over MCP.")
        decision, message = content.get("decision"), content.get("message")
        extra = sorted(set(content) - {"decision", "message"})
        if extra or decision not in ("approve", "reject") or not isinstance(message, str | None):
            raise TaskError(f"inputResponses[{key!r}] is not a decision: {RESPONSE_SHAPE}.")
        if decision == "approve":
            return hitl.approve_all(interrupt_value)
        reject = {"type": "reject", **({"message": message} if message else {})}
        return {"decisions": [reject] * count}
    raw = content.get("resume")
    if answer.action != "accept" or not isinstance(raw, str) or set(content) != {"resume"}:
        raise TaskError(f"inputResponses[{key!r}] gives no resume value: {RESPONSE_SHAPE}.")
    try:
        return json.loads(raw)
    except ValueError:
        raise TaskError(f"inputResponses[{key!r}].content.resume is not JSON.") from None
