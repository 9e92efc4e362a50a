"""The A2A request handler (``a2a.server.request_handlers.RequestHandler``) over threadline's
durable runs; the SDK's JSON-RPC dispatcher calls it for v1.0 and v0.3 method names alike.

- SendMessage / SendStreamingMessage: a message starts a task or answers one
  (``api.http.a2a.messages``). SendMessage waits for the run's end unless
  ``returnImmediately``; the stream is a Task, then the run's stored events as A2A events
  (``api.http.a2a.stream``).
- SubscribeToTask: the Task, then the task's stored events from a position: ``Last-Event-ID:
  <run_id>:<seq>[.<part>]`` (the ``metadata.threadline`` of the last event a client got) continues
  strictly after it, through the task's later runs; without one, after the snapshot's own
  position (its ``metadata.threadline``), live until the end. A terminal task without a position
  is refused (GetTask shows it); an input-required one gets the Task alone.
- Errors: threadline's 4xx become JSON-RPC errors that say what to do (``InvalidParams``; a task
  the caller cannot see, ``TaskNotFound``), never an internal error with a trace.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from datetime import UTC
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.request_handler import validate_request_params
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)

from api.http.a2a import card, messages, push, stream, tasks
from api.http.a2a.context import ASSISTANT, BASE_URL, acting, assistant, last_event, translated
from api.http.a2a.tasks import NAMES, TERMINAL, TaskRef
from api.runs.service import Service
from api.store import a2a_push, a2a_tasks, events

CANCEL_WAIT_SECONDS = 10.0
MAX_PAGE = 100
DEFAULT_PAGE = 50


async def _task(svc: Service, context: ServerCallContext, task_id: str) -> TaskRef:
    """The task ``task_id`` of the path's assistant (``TaskNotFound`` for one the caller cannot
    see)."""
    target = await assistant(svc, context)
    return await tasks.resolve(svc, target.assistant_id, task_id)


class Handler(RequestHandler):
    # -- messages ---------------------------------------------------------------------------------

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        with acting(context) as svc, translated():
            ref, run = await messages.start(svc, params, context)
            if not params.configuration.return_immediately:
                await svc.wait_for_end(str(run["run_id"]))
            ref = await tasks.resolve(svc, ref.runs[0]["assistant_id"], ref.task_id)
            return await tasks.snapshot(svc, ref, history_length=_history(params.configuration))

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        with acting(context) as svc, translated():
            ref, run = await messages.start(svc, params, context)
            ref = await tasks.resolve(svc, ref.runs[0]["assistant_id"], ref.task_id)
            snap = await tasks.snapshot(svc, ref, history_length=_history(params.configuration))
            snap.metadata.CopyFrom(tasks.position(str(run["run_id"]), 0))  # all its events follow
            yield snap
            async for event in stream.run_events(svc, ref.task_id, run, after=0):
                yield event

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        with acting(context) as svc, translated():
            ref = await _task(svc, context, params.id)
            at = last_event(context)
            if at is None:
                if ref.state in TERMINAL:
                    raise UnsupportedOperationError(
                        f"Task {ref.task_id!r} is {NAMES[ref.state]}: GetTask shows it. To "
                        "replay its events, send Last-Event-ID: <run_id>:0."
                    )
                latest = ref.latest
                async with svc.pool.connection() as conn:
                    seq = await events.last_seq(conn, latest["run_id"])
                snap = await tasks.snapshot(svc, ref)
                snap.metadata.CopyFrom(tasks.position(latest["run_id"], seq))
                yield snap
                if ref.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                    return
                follows: list[tuple[dict[str, Any], int, int | None]] = [(latest, seq, None)]
            else:
                run_id, seq, part = at
                run_id = run_id or ref.latest["run_id"]
                ids = [r["run_id"] for r in ref.runs]
                if run_id not in ids:
                    raise InvalidParamsError(
                        f"Last-Event-ID names run {run_id!r}, which is not one of task "
                        f"{ref.task_id!r}'s runs ({', '.join(ids)})."
                    )
                snap = await tasks.snapshot(svc, ref)
                snap.metadata.CopyFrom(tasks.position(run_id, seq))
                yield snap
                later = ref.runs[ids.index(run_id) :]
                follows = [(r, seq, part) if i == 0 else (r, 0, None) for i, r in enumerate(later)]
            for run, after, of in follows:
                async for event in stream.run_events(svc, ref.task_id, run, after=after, part=of):
                    yield event

    # -- tasks ------------------------------------------------------------------------------------

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        with acting(context) as svc, translated():
            ref = await _task(svc, context, params.id)
            length = params.history_length if params.HasField("history_length") else None
            if length is not None and length < 0:
                raise InvalidParamsError("historyLength is 0 or more.")
            return await tasks.snapshot(svc, ref, history_length=length)

    @validate_request_params
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        with acting(context) as svc, translated():
            target = await assistant(svc, context)
            size = params.page_size if params.HasField("page_size") else DEFAULT_PAGE
            if not 1 <= size <= MAX_PAGE:
                raise InvalidParamsError(f"pageSize is 1 to {MAX_PAGE}.")
            token = params.page_token or "0"
            if not token.isdigit() or len(token) > 9:
                raise InvalidParamsError(
                    "pageToken is the nextPageToken of the previous page, or empty."
                )
            length = params.history_length if params.HasField("history_length") else None
            if length is not None and length < 0:
                raise InvalidParamsError("historyLength is 0 or more.")
            state = None
            if params.status != TaskState.TASK_STATE_UNSPECIFIED:
                state = NAMES.get(params.status, "none")  # rejected, auth-required: never
            after = (
                params.status_timestamp_after.ToDatetime(tzinfo=UTC)
                if params.HasField("status_timestamp_after")
                else None
            )
            scope = await svc.scope("search", {"metadata": {}})
            async with svc.pool.connection() as conn:
                rows, total = await a2a_tasks.listed(
                    conn,
                    assistant_id=target.assistant_id,
                    scope=scope.where("t"),
                    context_id=params.context_id or None,
                    state=state,
                    updated_after=after,
                    limit=size,
                    offset=int(token),
                )
                refs = []
                for row in rows:
                    runs = await a2a_tasks.task_runs(conn, row["thread_id"], row["first_run_id"])
                    task_id = tasks.make_id(row["thread_id"], row["first_run_id"])
                    refs.append(TaskRef(task_id, row["thread_id"], runs))
            found = [
                await tasks.snapshot(
                    svc, ref, history_length=length, include_artifacts=params.include_artifacts
                )
                for ref in refs
                if ref.runs
            ]
            more = int(token) + len(rows) < total
            return ListTasksResponse(
                tasks=found,
                next_page_token=str(int(token) + len(rows)) if more else "",
                page_size=size,
                total_size=total,
            )

    @validate_request_params
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        with acting(context) as svc, translated():
            ref = await _task(svc, context, params.id)
            latest = ref.latest
            if latest["status"] not in tasks.ACTIVE:
                raise TaskNotCancelableError(
                    f"Task {ref.task_id!r} is {NAMES[ref.state]}: only a submitted or working "
                    "task can be canceled."
                )
            await svc.cancel(ref.thread_id, latest["run_id"])
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CANCEL_WAIT_SECONDS):
                    await svc.wait_for_end(latest["run_id"])
            ref = await _task(svc, context, params.id)
            return await tasks.snapshot(svc, ref)

    # -- push notification configs ----------------------------------------------------------------

    @validate_request_params
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        with acting(context) as svc, translated():
            ref = await _task(svc, context, params.task_id)
            return await push.save(svc, ref, await push.checked(svc, params))

    @validate_request_params
    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        with acting(context) as svc, translated():
            ref = await _task(svc, context, params.task_id)
            return await push.one(svc, ref, params.id)

    @validate_request_params
    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        with acting(context) as svc, translated():
            ref = await _task(svc, context, params.task_id)
            async with svc.pool.connection() as conn:
                rows = await a2a_push.configs(conn, ref.task_id)
            return ListTaskPushNotificationConfigsResponse(
                configs=[push.as_config(r) for r in rows]
            )

    @validate_request_params
    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        with acting(context) as svc, translated():
            ref = await _task(svc, context, params.task_id)
            async with svc.pool.connection() as conn:
                gone = await a2a_push.delete_config(conn, ref.task_id, params.id)
            if not gone:
                raise InvalidParamsError(
                    f"Task {ref.task_id!r} has no push notification config {params.id!r}."
                )

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        with acting(context) as svc, translated():
            target = await assistant(svc, context)
            name = context.state.get(ASSISTANT) or target.assistant_id
            return await card.build(svc, name, context.state[BASE_URL])


def _history(config: Any) -> int | None:
    if not config.HasField("history_length"):
        return None
    if config.history_length < 0:
        raise InvalidParamsError("historyLength is 0 or more.")
    return int(config.history_length)
