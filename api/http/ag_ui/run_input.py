"""A ``RunAgentInput`` as the threadline run it asks for (:func:`run_create`), or a clear refusal.

- ``threadId`` is the thread (created by the run when it does not exist); ``runId`` goes into
  the run's metadata as ``{"ag_ui": {"run_id": ..., "parent_run_id": ...}}``.
- ``messages``: AG-UI clients send the whole conversation; the run's input is
  ``{"messages": [...]}`` with those whose ids the thread's ``values["messages"]`` does not hold
  yet, in order (as ag-ui-langgraph does), as LangChain messages with the same ids: user →
  human, assistant → ai (``toolCalls`` with JSON arguments), system and developer → system,
  tool → tool. Text content only (a non-text part is refused), no new activity or reasoning
  messages. Nothing new and no ``resume``: 422 (there is nothing to run).
- ``resume``: answers to pending interrupts (:mod:`api.http.ag_ui.interrupts`), sent as
  ``command.resume`` ``{interruptId: answer}``; an id not pending is a 409 naming those that
  are. Not together with new messages.
- ``state`` is read-only here: the graph's own nodes change it. What a client sends back is what
  ``STATE_SNAPSHOT``/``STATE_DELTA`` gave it; each key it sends must hold what the thread holds
  (the values without ``messages``), else 409 naming the keys (change a thread's state with
  ``POST /threads/{id}/state``).
- ``tools`` (frontend tools), ``context`` and ``forwardedProps`` are not used: empty or absent,
  else 422 saying so. A field RunAgentInput does not define: 422 naming it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from ag_ui.core import RunAgentInput

from api.contract.runs import CommandBody, RunCreate
from api.http.ag_ui.interrupts import answer
from api.http.ag_ui.snapshots import HIDDEN, state_view
from api.platform.errors import Conflict, Invalid, NotFound
from api.platform.serde import to_jsonable
from api.platform.validation import MAX_ID_LENGTH, THREAD_ID_PATTERN, THREAD_ID_RULE
from api.runs.service import Service

STREAM_MODES = ["values", "updates", "messages-tuple", "custom"]
"""What the run stores for the AG-UI stream (``api.http.ag_ui.translate``)."""
ROLES = {"user": "human", "assistant": "ai", "system": "system", "developer": "system"}


def check_ids(body: RunAgentInput) -> None:
    """``threadId`` is a thread id this server takes; ``runId`` fits a run's metadata."""
    if not re.fullmatch(THREAD_ID_PATTERN, body.thread_id) or len(body.thread_id) > MAX_ID_LENGTH:
        raise Invalid(f"threadId {body.thread_id[:80]!r} is not a thread id: {THREAD_ID_RULE}.")
    if not body.run_id or len(body.run_id) > MAX_ID_LENGTH:
        raise Invalid(f"runId must be 1 to {MAX_ID_LENGTH} characters.")
    extra = sorted(body.model_extra or {})
    if extra:
        raise Invalid(f"RunAgentInput has no field(s) {extra}; leave them out.")
    version = body.protocol_version
    if version is not None and version.split(".")[0] != "1":
        raise Invalid(f"protocolVersion {version!r}: this server speaks AG-UI 1.0.")
    _refuse_unused(body)


async def run_create(svc: Service, assistant_id: str, body: RunAgentInput) -> RunCreate:
    """The run the input asks for (the caller sets the door, ``ag-ui``, before creating it)."""
    found = await _thread(svc, body.thread_id)
    if found is None and body.resume:
        raise NotFound(f"No thread {body.thread_id!r}: there is no interrupt of it to answer.")
    values, interrupts = found or ({}, {})
    _check_state(body.state, values)
    known = {m.get("id") for m in values.get("messages") or [] if isinstance(m, dict)}
    new = [m for m in body.messages if m.id not in known]
    metadata: dict[str, Any] = {"ag_ui": {"run_id": body.run_id}}
    if body.parent_run_id:
        metadata["ag_ui"]["parent_run_id"] = body.parent_run_id
    common: dict[str, Any] = {
        "assistant_id": assistant_id,
        "stream_mode": STREAM_MODES,
        "metadata": metadata,
    }
    if body.resume:
        if new:
            raise Invalid(
                f"Send either resume or new messages, not both: messages {[m.id for m in new]} "
                "are not in the thread yet. Answer the interrupts first, then send them."
            )
        return RunCreate(
            **common, command=CommandBody(resume=_answers(body, interrupts)), if_not_exists="reject"
        )
    if not new:
        raise Invalid(
            "Nothing to run: every message is already in the thread and there is no resume. "
            "Add a message (with a new id), or answer the pending interrupts with resume."
        )
    return RunCreate(
        **common, input={"messages": [_langchain(m) for m in new]}, if_not_exists="create"
    )


async def _thread(svc: Service, thread_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The thread's values (JSON) and pending interrupts (id → value); None for a thread that
    does not exist or is not the caller's (a new run's creation tells those apart)."""
    try:
        state = await svc.state(thread_id)
    except NotFound:
        return None
    values = orjson.loads(orjson.dumps(to_jsonable(state.values)))
    pending = {i.id: to_jsonable(i.value) for i in state.interrupts}
    return (values if isinstance(values, dict) else {}), pending


def _refuse_unused(body: RunAgentInput) -> None:
    if body.tools:
        raise Invalid(
            f"tools: this server runs the assistant's own tools; frontend tools are not "
            f"supported ({[t.name for t in body.tools]}). Send tools: [] or leave it out."
        )
    if body.context:
        raise Invalid(
            "context: this server does not pass AG-UI context to the graph. Put what the agent "
            "should know in a message, and send context: [] or leave it out."
        )
    if body.forwarded_props not in (None, {}):
        raise Invalid(
            "forwardedProps: this server uses none. Send {} or leave it out (to continue a "
            "run's stream, send the same threadId and runId with a Last-Event-ID header)."
        )


def _check_state(state: Any, values: dict[str, Any]) -> None:
    if state is None:
        return
    if not isinstance(state, dict):
        raise Invalid("state must be an object (the state STATE_SNAPSHOT gave), or left out.")
    current = state_view(values)
    differ = sorted(k for k, v in state.items() if k in HIDDEN or current.get(k, ...) != v)
    if differ:
        raise Conflict(
            f"state differs from the thread's at {differ[:20]}: the state is read-only over "
            "AG-UI (the graph's nodes change it). Send the state the stream gave you, {} or "
            f"none; to change it, POST /threads/{{thread_id}}/state."
        )


def _answers(body: RunAgentInput, interrupts: dict[str, Any]) -> dict[str, Any]:
    """``{interruptId: answer}`` for the resume entries (409 for an id that is not pending)."""
    answers: dict[str, Any] = {}
    for entry in body.resume or []:
        if entry.interrupt_id in answers:
            raise Invalid(f"resume answers interrupt {entry.interrupt_id} twice; answer it once.")
        if entry.interrupt_id not in interrupts:
            pending = list(interrupts)
            raise Conflict(
                f"Interrupt {entry.interrupt_id!r} is not pending on thread {body.thread_id!r} "
                f"(already answered, or unknown). Pending interrupt ids: {pending}."
                if pending
                else f"Thread {body.thread_id!r} has no pending interrupt (interrupt "
                f"{entry.interrupt_id!r} was already answered, or is unknown). Send a message "
                "instead of resume."
            )
        answers[entry.interrupt_id] = answer(entry, interrupts[entry.interrupt_id])
    return answers


def _langchain(message: Any) -> dict[str, Any]:
    """One new AG-UI message as a LangChain message dict (same id)."""
    if message.model_extra:
        raise Invalid(f"message {message.id!r} has unknown field(s) {sorted(message.model_extra)}.")
    role = message.role
    if role == "tool":
        out = {
            "type": "tool",
            "id": message.id,
            "content": _text(message),
            "tool_call_id": message.tool_call_id,
        }
        return {**out, "status": "error"} if message.error else out
    if role not in ROLES:
        raise Invalid(
            f"message {message.id!r}: a new {role} message is not taken as input; send user, "
            "assistant, system, developer or tool messages."
        )
    out = {"type": ROLES[role], "id": message.id, "content": _text(message)}
    if getattr(message, "name", None):
        out["name"] = message.name
    if role == "assistant":
        out["tool_calls"] = [_tool_call(message.id, c) for c in message.tool_calls or []]
    return out


def _text(message: Any) -> str:
    content = message.content
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for part in content:
        if part.type != "text":
            raise Invalid(
                f"message {message.id!r}: {part.type} content is not supported here; send text."
            )
        texts.append(part.text)
    return "".join(texts)


def _tool_call(message_id: str, call: Any) -> dict[str, Any]:
    try:
        args = orjson.loads(call.function.arguments or "{}")
    except orjson.JSONDecodeError:
        raise Invalid(
            f"message {message_id!r}: tool call {call.id!r} has arguments that are not JSON."
        ) from None
    if not isinstance(args, dict):
        raise Invalid(f"message {message_id!r}: tool call {call.id!r} arguments must be an object.")
    return {"id": call.id, "name": call.function.name, "args": args, "type": "tool_call"}
