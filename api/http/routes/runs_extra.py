"""More runs routes: delete a finished run; threadless runs (``POST /runs``, ``/runs/stream``,
``/runs/wait``, ``GET /runs/{run_id}/stream``).

A threadless run is an ordinary durable run on a thread created for it (owned by the caller);
its ``Location`` and ``Content-Location`` name that thread, as LangGraph Server's do. Unless
``on_completion`` is ``keep``, the thread goes after the run ended (``api.engine.ephemeral``).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from sse_starlette import EventSourceResponse

from api.contract.runs import Run, RunCreate
from api.http.checked_route import CheckedRoute, RunId, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.http.routes.runs import (
    CREATE_ERRORS,
    SSE,
    LastEventId,
    LastEventIdQuery,
    _cancel_on_disconnect,
    _join,
    _links,
    _respond,
    _slot,
)
from api.http.sse import run_events
from api.http.stream_mode_query import StreamModeQuery, query_modes
from api.platform.errors import Conflict, Invalid, NotFound
from api.platform.validation import check_state_writes
from api.runs.assistant_access import for_run
from api.store import runs

router = APIRouter(tags=["runs"], route_class=CheckedRoute)


@router.delete(
    "/threads/{thread_id}/runs/{run_id}", status_code=204, responses=responses(404, 409, 422)
)
async def delete_run(thread_id: ThreadId, run_id: RunId, svc: ServiceDep) -> Response:
    """Delete a finished run and its events (the thread's checkpoints stay: they are the
    thread's state). An active run is cancelled first (409)."""
    run = await svc.run(thread_id, run_id, "delete")
    if run["status"] in ("pending", "running"):
        raise Conflict(
            f"Run {run_id} is {run['status']}: cancel it first "
            f"(POST /threads/{thread_id}/runs/{run_id}/cancel), then delete it once it ended."
        )
    async with svc.pool.connection() as conn:
        if not await runs.delete_finished(conn, thread_id, [run_id]):
            raise NotFound(f"No run {run_id!r} on thread {thread_id!r}.")
    return Response(status_code=204)


async def _create(svc: ServiceDep, body: RunCreate) -> dict[str, Any]:
    if body.command is not None:
        raise Invalid(
            "a threadless run starts on a new thread, which has nothing to resume: send "
            "'input', or create the run on its thread (POST /threads/{thread_id}/runs)"
        )
    if body.checkpoint is not None:
        raise Invalid(
            "a threadless run starts on a new thread, which has no checkpoints: drop "
            "'checkpoint' / 'checkpoint_id', or create the run on its thread"
        )

    async def nothing() -> Any:
        return {}

    assistant = await for_run(svc, body.assistant_id)
    await check_state_writes(svc.graph(assistant.graph_id), body.input, "input", nothing)
    body = body.model_copy(update={"if_not_exists": "create"})
    return await svc.create_run(str(uuid.uuid4()), body, threadless=True, assistant=assistant)


@router.post("/runs", response_model=Run, responses=CREATE_ERRORS)
async def create_threadless(body: RunCreate, svc: ServiceDep, response: Response) -> Any:
    """Queue a background run on a new thread (removed after the run unless
    ``on_completion`` is ``keep``)."""
    run = await _create(svc, body)
    response.headers.update(_links(run["thread_id"], run["run_id"]))
    return run


@router.post("/runs/stream", response_class=EventSourceResponse, responses={**SSE, **CREATE_ERRORS})
async def stream_threadless(
    body: RunCreate, svc: ServiceDep, request: Request
) -> EventSourceResponse:
    """Queue a run on a new thread and stream its events (SSE)."""
    with _slot(request, svc) as slot:
        run = await _create(svc, body)
        thread_id, run_id = run["thread_id"], run["run_id"]
        stream = run_events(svc.pool, svc.hub, run_id, after=0, modes=body.modes())
        if body.on_disconnect == "cancel":
            stream = _cancel_on_disconnect(svc, thread_id, run_id, stream)
        return _respond(svc, slot, stream, _links(thread_id, run_id))


@router.post("/runs/wait", responses=CREATE_ERRORS)
async def wait_threadless(body: RunCreate, svc: ServiceDep, response: Response) -> Any:
    """Queue a run on a new thread and return its values once it ends."""
    run = await _create(svc, body)
    response.headers["Content-Location"] = _links(run["thread_id"], run["run_id"])[
        "Content-Location"
    ]
    await svc.wait_for_end(run["run_id"])
    return await svc.final_values(run["thread_id"], run)


@router.get(
    "/runs/{run_id}/stream",
    response_class=EventSourceResponse,
    responses={**SSE, **responses(404, 422)},
)
async def join_threadless_stream(
    run_id: RunId,
    svc: ServiceDep,
    request: Request,
    last_event_id: LastEventId = None,
    last_event_id_query: LastEventIdQuery = None,
    stream_mode: StreamModeQuery = None,
    cancel_on_disconnect: bool = Query(False),
) -> EventSourceResponse:
    """Join a run's stream by its id alone (the SDK's ``joinStream`` without a thread), as
    ``GET /threads/{thread_id}/runs/{run_id}/stream`` does."""
    with _slot(request, svc) as slot:
        requested = query_modes(stream_mode)
        try:
            async with svc.pool.connection() as conn:
                found = await runs.by_id(conn, run_id)
        except ValueError:
            found = None
        try:
            if found is None:
                raise NotFound(f"No run {run_id!r}.")
            run = await svc.run(found["thread_id"], run_id)  # the caller's, or not found
        except NotFound:
            raise NotFound(f"No run {run_id!r}.") from None  # another tenant's thread unnamed
        last = last_event_id if last_event_id is not None else last_event_id_query
        return _join(svc, slot, run, last, requested, cancel_on_disconnect=cancel_on_disconnect)
