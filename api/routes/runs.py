"""Runs: create (background, stream, wait), list, get, join, join the stream, cancel."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse

from api.deps import ServiceDep
from api.errors import ApiError, Invalid
from api.schemas import SUPPORTED_MODES, Run, RunCreate
from api.sse import parse_last_event_id, run_events, sse_response

router = APIRouter(tags=["runs"])


def _links(thread_id: str, run_id: str) -> dict[str, str]:
    stream = f"/threads/{thread_id}/runs/{run_id}/stream"
    return {"Location": stream, "Content-Location": f"/threads/{thread_id}/runs/{run_id}"}


@router.post("/threads/{thread_id}/runs", response_model=Run)
async def create_run(thread_id: str, body: RunCreate, svc: ServiceDep) -> Any:
    """Queue a background run; workers execute it."""
    return await svc.create_run(thread_id, body)


@router.post("/threads/{thread_id}/runs/stream", response_class=EventSourceResponse)
async def create_and_stream(
    thread_id: str, body: RunCreate, svc: ServiceDep, request: Request
) -> EventSourceResponse:
    """Queue a run and stream its events (SSE); ``Location`` names the join-stream URL."""
    run = await svc.create_run(thread_id, body)
    stream = run_events(svc.pool, svc.hub, run["run_id"], after=0, modes=body.modes())
    if body.on_disconnect == "cancel":
        stream = _cancel_on_disconnect(svc, thread_id, run["run_id"], stream, request)
    return sse_response(stream, headers=_links(thread_id, run["run_id"]))


async def _cancel_on_disconnect(
    svc: ServiceDep, thread_id: str, run_id: str, stream: Any, request: Request
) -> Any:
    ended = False
    try:
        async for event in stream:
            if event.event == "end":
                ended = True
            yield event
    finally:
        if not ended:
            # The disconnect cancelled this generator's task scope; shield the cancel from it
            # (anyio cancellation is level-triggered: any unshielded await would be cancelled).
            with anyio.CancelScope(shield=True), contextlib.suppress(ApiError):
                await svc.cancel(thread_id, run_id)  # ApiError: finished meanwhile


@router.post("/threads/{thread_id}/runs/wait")
async def create_and_wait(thread_id: str, body: RunCreate, svc: ServiceDep) -> Any:
    """Queue a run and return the thread's values once it ends."""
    run = await svc.create_run(thread_id, body)
    await svc.wait_for_end(run["run_id"])
    return await svc.final_values(thread_id, run)


@router.get("/threads/{thread_id}/runs", response_model=list[Run])
async def list_runs(
    thread_id: str,
    svc: ServiceDep,
    limit: int = Query(10, ge=1, le=1000),
    offset: int = Query(0, ge=0),
    status: str | None = None,
) -> Any:
    """The thread's runs, newest first."""
    from api.store import runs

    await svc.thread(thread_id)
    async with svc.pool.connection() as conn:
        return await runs.list_for_thread(
            conn, thread_id, limit=limit, offset=offset, status=status
        )


@router.get("/threads/{thread_id}/runs/{run_id}", response_model=Run)
async def get_run(thread_id: str, run_id: str, svc: ServiceDep) -> Any:
    """One run."""
    return await svc.run(thread_id, run_id)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, svc: ServiceDep) -> Any:
    """Wait for a run to end; returns the thread's values."""
    run = await svc.run(thread_id, run_id)
    await svc.wait_for_end(run_id)
    return await svc.final_values(thread_id, run)


@router.get("/threads/{thread_id}/runs/{run_id}/stream", response_class=EventSourceResponse)
async def join_stream(
    thread_id: str,
    run_id: str,
    svc: ServiceDep,
    request: Request,
    last_event_id: str | None = Header(None, alias="Last-Event-ID"),
    last_event_id_query: str | None = Query(None, alias="last_event_id"),
    stream_mode: list[str] | None = Query(None),
    cancel_on_disconnect: bool = Query(False),
) -> EventSourceResponse:
    """Join a run's stream: replays what came after ``Last-Event-ID`` (``-1``: all), then live.

    The ``last_event_id`` query parameter does the same for clients that cannot set headers
    (a new ``EventSource``); the header wins when both are sent.

    ``stream_mode`` narrows the run's modes (the SDK sends an empty value for "all of them");
    ``cancel_on_disconnect=true`` cancels the run when this client goes away before its end.
    """
    requested = [m for m in stream_mode or [] if m]
    unknown = [m for m in requested if m not in SUPPORTED_MODES]
    if unknown:
        raise Invalid(f"stream_mode {unknown} is not supported; use {', '.join(SUPPORTED_MODES)}")
    run = await svc.run(thread_id, run_id)
    after = parse_last_event_id(last_event_id if last_event_id is not None else last_event_id_query)
    modes = requested or run["kwargs"].get("stream_mode") or ["values"]
    stream = run_events(svc.pool, svc.hub, run_id, after=after, modes=modes)
    if cancel_on_disconnect:
        stream = _cancel_on_disconnect(svc, thread_id, run_id, stream, request)
    return sse_response(stream, headers=_links(thread_id, run_id))


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", response_model=Run, status_code=202)
async def cancel_run(thread_id: str, run_id: str, svc: ServiceDep) -> Any:
    """Cancel a pending or running run (409 when it already finished)."""
    return await svc.cancel(thread_id, run_id)
