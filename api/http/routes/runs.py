"""Runs: create (background, stream, wait), list, get, join, join the stream, cancel."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from api.contract.runs import Run, RunCreate, RunStatus
from api.http.checked_route import CheckedRoute, Limit, Offset, RunId, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.http.json_body import MAX_INT
from api.http.sse import parse_last_event_id, run_events, sse_response
from api.http.stream_limits import TOO_MANY_STREAMS, Slot, claim_stream
from api.http.stream_mode_query import StreamModeQuery, query_modes
from api.platform.errors import ApiError, NotFound
from api.platform.validation import check_state_writes
from api.runs.assistant_access import for_run
from api.store.runs import list_for_thread

router = APIRouter(tags=["runs"], route_class=CheckedRoute)

EVENT_ID = r"^(-1|[0-9]{0,18})$"
"""An event's sequence number (``-1``: from the start); checked by ``parse_last_event_id``."""
LastEventId = Annotated[
    str | None, Header(alias="Last-Event-ID", json_schema_extra={"pattern": EVENT_ID})
]
"""Resume a stream after this event (``-1``: from the start)."""
LastEventIdQuery = Annotated[
    str | None, Query(alias="last_event_id", json_schema_extra={"pattern": EVENT_ID})
]
"""The same as a query parameter, for clients that cannot set headers (a new ``EventSource``)."""
CREATE_ERRORS = responses(403, 404, 409, 413, 422)
"""A run is refused when its thread is unknown (404) or busy (409), its body malformed (422) or
too large (413), or its approval rules would loosen the server's (403)."""
SSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: `metadata` first, then the run's events, then `end`.",
        "content": {
            "text/event-stream": {
                "itemSchema": {
                    "type": "object",
                    "description": "One event: `id` is its number in the run, `data` JSON.",
                    "properties": {
                        "event": {"type": "string"},
                        "data": {"type": "string", "contentMediaType": "application/json"},
                        "id": {"type": "string"},
                        "retry": {"type": "integer", "minimum": 0},
                    },
                    "required": ["event", "data"],
                }
            }
        },
    },
    **TOO_MANY_STREAMS,
}


async def _create(svc: ServiceDep, thread_id: str, body: RunCreate) -> dict[str, Any]:
    """Queue the run, once its input and ``command.update`` are values its graph's state can
    take (a stored value it cannot would break every later read of the thread)."""
    assistant = await for_run(svc, body.assistant_id)
    graph = svc.graph(assistant.graph_id)

    async def current() -> Any:
        try:
            return (await svc.state(thread_id, assistant.graph_id)).values
        except NotFound:
            return {}

    await check_state_writes(graph, body.input, "input", current)
    if body.command is not None:
        await check_state_writes(graph, body.command.update, "command.update", current)
    return await svc.create_run(thread_id, body, assistant=assistant)


def _links(thread_id: str, run_id: str) -> dict[str, str]:
    stream = f"/threads/{thread_id}/runs/{run_id}/stream"
    return {"Location": stream, "Content-Location": f"/threads/{thread_id}/runs/{run_id}"}


def _slot(request: Request, svc: ServiceDep) -> Slot:
    """One of the client's streams (429 over ``THREADLINE_MAX_STREAMS_PER_CLIENT``), claimed
    before anything else; ``with`` it: an error before the stream starts releases it."""
    return claim_stream(request, svc.runtime.settings.max_streams_per_client)


def _respond(
    svc: ServiceDep, slot: Slot, stream: Any, headers: dict[str, str] | None = None
) -> EventSourceResponse:
    return sse_response(
        stream,
        headers,
        slot=slot,
        send_timeout=svc.runtime.settings.sse_send_timeout_seconds,
    )


@router.post("/threads/{thread_id}/runs", response_model=Run, responses=CREATE_ERRORS)
async def create_run(thread_id: ThreadId, body: RunCreate, svc: ServiceDep) -> Any:
    """Queue a background run; workers execute it."""
    return await _create(svc, thread_id, body)


@router.post(
    "/threads/{thread_id}/runs/stream",
    response_class=EventSourceResponse,
    responses={**SSE, **CREATE_ERRORS},
)
async def create_and_stream(
    thread_id: ThreadId, body: RunCreate, svc: ServiceDep, request: Request
) -> EventSourceResponse:
    """Queue a run and stream its events (SSE); ``Location`` names the join-stream URL."""
    with _slot(request, svc) as slot:
        run = await _create(svc, thread_id, body)
        stream = run_events(svc.pool, svc.hub, run["run_id"], after=0, modes=body.modes())
        if body.on_disconnect == "cancel":
            stream = _cancel_on_disconnect(svc, thread_id, run["run_id"], stream)
        return _respond(svc, slot, stream, _links(thread_id, run["run_id"]))


async def _cancel_on_disconnect(svc: ServiceDep, thread_id: str, run_id: str, stream: Any) -> Any:
    ended = False
    try:
        async for frames in stream:
            yield frames
        ended = True  # the stream sent the run's end (or the run went with a rollback)
    finally:
        if not ended:
            # The disconnect cancelled this generator's task scope; shield the cancel from it
            # (anyio cancellation is level-triggered: any unshielded await would be cancelled).
            with anyio.CancelScope(shield=True), contextlib.suppress(ApiError):
                await svc.cancel(thread_id, run_id)  # ApiError: finished meanwhile


@router.post("/threads/{thread_id}/runs/wait", responses=CREATE_ERRORS)
async def create_and_wait(thread_id: ThreadId, body: RunCreate, svc: ServiceDep) -> Any:
    """Queue a run and return the thread's values once it ends."""
    run = await _create(svc, thread_id, body)
    await svc.wait_for_end(run["run_id"])
    return await svc.final_values(thread_id, run)


@router.get("/threads/{thread_id}/runs", response_model=list[Run], responses=responses(404, 422))
async def list_runs(
    thread_id: ThreadId,
    svc: ServiceDep,
    limit: Limit = 10,
    offset: Offset = 0,
    status: RunStatus | None = None,
) -> Any:
    """The thread's runs, newest first."""
    await svc.thread(thread_id, values=False)
    async with svc.pool.connection() as conn:
        return await list_for_thread(conn, thread_id, limit=limit, offset=offset, status=status)


@router.get("/threads/{thread_id}/runs/{run_id}", response_model=Run, responses=responses(404, 422))
async def get_run(thread_id: ThreadId, run_id: RunId, svc: ServiceDep) -> Any:
    """One run."""
    return await svc.run(thread_id, run_id)


@router.get("/threads/{thread_id}/runs/{run_id}/join", responses=responses(404, 422))
async def join_run(thread_id: ThreadId, run_id: RunId, svc: ServiceDep) -> Any:
    """Wait for a run to end; returns the thread's values."""
    run = await svc.run(thread_id, run_id)
    await svc.wait_for_end(run_id)
    return await svc.final_values(thread_id, run)


@router.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    response_class=EventSourceResponse,
    responses={**SSE, **responses(404, 422)},
)
async def join_stream(
    thread_id: ThreadId,
    run_id: RunId,
    svc: ServiceDep,
    request: Request,
    last_event_id: LastEventId = None,
    last_event_id_query: LastEventIdQuery = None,
    stream_mode: StreamModeQuery = None,
    cancel_on_disconnect: bool = Query(False),
) -> EventSourceResponse:
    """Join a run's stream: replays what came after ``Last-Event-ID`` (``-1``: all), then live.

    The ``last_event_id`` query parameter does the same for clients that cannot set headers
    (a new ``EventSource``); the header wins when both are sent.

    ``stream_mode`` narrows the run's modes (the SDK sends an empty value for "all of them");
    ``cancel_on_disconnect=true`` cancels the run when this client goes away before its end.
    """
    with _slot(request, svc) as slot:
        requested = query_modes(stream_mode)
        run = await svc.run(thread_id, run_id)
        last = last_event_id if last_event_id is not None else last_event_id_query
        return _join(svc, slot, run, last, requested, cancel_on_disconnect=cancel_on_disconnect)


def _join(
    svc: ServiceDep,
    slot: Slot,
    run: dict[str, Any],
    last_event_id: str | None,
    requested: list[str],
    *,
    cancel_on_disconnect: bool = False,
) -> EventSourceResponse:
    thread_id, run_id = run["thread_id"], run["run_id"]
    after = parse_last_event_id(last_event_id)
    after = min(after, MAX_INT)  # past any event there is (sequence numbers are bigints)
    modes = requested or run["kwargs"].get("stream_mode") or ["values"]
    stream = run_events(svc.pool, svc.hub, run_id, after=after, modes=modes)
    if cancel_on_disconnect:
        stream = _cancel_on_disconnect(svc, thread_id, run_id, stream)
    return _respond(svc, slot, stream, _links(thread_id, run_id))


async def _nothing() -> AsyncIterator[ServerSentEvent]:
    return
    yield  # an async generator that ends at once


@router.get(
    "/threads/{thread_id}/stream",
    response_class=EventSourceResponse,
    responses={**SSE, **responses(404, 422)},
)
async def join_thread_stream(
    thread_id: ThreadId,
    svc: ServiceDep,
    request: Request,
    last_event_id: LastEventId = None,
    stream_mode: StreamModeQuery = None,
) -> EventSourceResponse:
    """Join the stream of the thread's active run (what ``useStream`` does when it reconnects):
    what came after ``Last-Event-ID``, then live, until the run ends. ``Location`` names that
    run's own stream. With no active run the stream ends at once, with no events."""
    with _slot(request, svc) as slot:
        requested = query_modes(stream_mode)
        await svc.thread(thread_id, values=False)
        run = await svc.active_run(thread_id)
        if run is None:
            return _respond(svc, slot, _nothing())
        return _join(svc, slot, run, last_event_id, requested)


@router.post(
    "/threads/{thread_id}/runs/{run_id}/cancel",
    response_model=Run,
    status_code=202,
    responses=responses(404, 409, 422),
)
async def cancel_run(
    thread_id: ThreadId, run_id: RunId, svc: ServiceDep, wait: bool = Query(False)
) -> Any:
    """Cancel a pending or running run (409 when it already finished); ``wait=true`` answers
    once it stopped."""
    cancelled = await svc.cancel(thread_id, run_id)
    if not wait:
        return cancelled
    await svc.wait_for_end(run_id)
    return await svc.refreshed_run(thread_id, run_id)
