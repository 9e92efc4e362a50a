"""SendMessage's part: a message starts a task (a run on its ``contextId`` thread, new without
one or when none exists yet), or answers the input request of the task its ``taskId`` names: a
resume run created with the door ``a2a`` (so exactly once, and audited ``detail.via: a2a``),
carrying ``{"a2a": {"task_id": ...}}``. A decision sent to a task that no longer waits for one
is told it was already answered; another message to a terminal or working task is refused with
what to do. A push config in the message's configuration is checked before anything starts."""

from __future__ import annotations

import re
import uuid
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Message, SendMessageRequest, TaskState
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from api.contract.runs import RunCreate
from api.http.a2a import parts, push, tasks
from api.http.a2a.context import assistant
from api.http.a2a.tasks import NAMES, TERMINAL, TaskRef
from api.platform.validation import MAX_ID_LENGTH, THREAD_ID_PATTERN, THREAD_ID_RULE
from api.runs.service import Service
from api.store import audit

STREAM_MODES = ["updates"]
"""What an A2A run stores: the nodes' writes, where the agent's messages are."""


async def answer(svc: Service, ref: TaskRef, message: Message) -> dict[str, Any]:
    """The resume run answering the task's input request."""
    state = ref.state
    if state != TaskState.TASK_STATE_INPUT_REQUIRED and parts.is_answer(message):
        raise InvalidParamsError(
            f"Task {ref.task_id!r} is {NAMES[state]}, not waiting for input: its approval "
            "request was already answered (a decision is applied once), or it had none. "
            "GetTask shows it."
        )
    if state in TERMINAL:
        raise UnsupportedOperationError(
            f"Task {ref.task_id!r} is {NAMES[state]}: a terminal task takes no more "
            f"messages. Send one without taskId (contextId {ref.thread_id!r} goes on in "
            "the same context)."
        )
    _, interrupts = await tasks.thread_state(svc, ref.thread_id, ref.latest["graph_id"])
    pending = {str(i["id"]): i["value"] for i in interrupts}
    if state != TaskState.TASK_STATE_INPUT_REQUIRED or not pending:
        raise InvalidParamsError(
            f"Task {ref.task_id!r} is {NAMES[state]}, not waiting for input: its approval "
            "request was already answered (a decision is applied once), or it has none. "
            "Follow it with SubscribeToTask or GetTask, or cancel it."
        )
    answers = parts.answer(message, pending)
    unknown = [k for k in answers if k not in pending]
    if unknown:
        async with svc.pool.connection() as conn:
            done = await audit.answered(conn, ref.thread_id, unknown)
        if done:
            raise InvalidParamsError(
                f"Interrupt(s) {done} were already answered; a decision is applied once."
            )
        raise InvalidParamsError(
            f"Interrupt(s) {unknown} are not pending on task {ref.task_id!r}; pending: "
            f"{list(pending)}."
        )
    body = RunCreate(
        assistant_id=ref.latest["assistant_id"],
        command={"resume": answers},
        stream_mode=STREAM_MODES,
        metadata={"a2a": {"task_id": ref.task_id}},
    )
    return await svc.create_run(ref.thread_id, body)


async def start(
    svc: Service, params: SendMessageRequest, context: ServerCallContext
) -> tuple[TaskRef, dict[str, Any]]:
    """Start the task, or answer it: (the task, the run just created)."""
    target = await assistant(svc, context)
    message = params.message
    config = params.configuration
    hook = (
        await push.checked(svc, config.task_push_notification_config)
        if config.HasField("task_push_notification_config")
        else None
    )
    if message.task_id:
        ref = await tasks.resolve(svc, target.assistant_id, message.task_id)
        if message.context_id and message.context_id != ref.thread_id:
            raise InvalidParamsError(
                f"Task {message.task_id!r} is in context {ref.thread_id!r}, not "
                f"{message.context_id!r}: send its own contextId, or none."
            )
        run = await answer(svc, ref, message)
    else:
        thread_id = message.context_id or str(uuid.uuid4())
        if len(thread_id) > MAX_ID_LENGTH or not re.fullmatch(THREAD_ID_PATTERN, thread_id):
            raise InvalidParamsError(
                f"contextId {thread_id[:100]!r} is not a context id: {THREAD_ID_RULE}."
            )
        body = RunCreate(
            assistant_id=target.assistant_id,
            input=parts.run_input(message),
            stream_mode=STREAM_MODES,
            metadata={"a2a": {"task_start": True}},
            if_not_exists="create",
        )
        run = await svc.create_run(thread_id, body)
        first = {**run, "a2a_state": "submitted"}
        ref = TaskRef(tasks.make_id(thread_id, str(run["run_id"])), thread_id, [first])
    if hook is not None:
        # From the run's creation: its end is told even if it came before this insert.
        await push.save(svc, ref, hook, since=run["created_at"])
    return ref, run
