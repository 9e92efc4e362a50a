"""Schedules (LangGraph Server's crons): create (threadless or on a thread), search, count,
update, delete. Each due time creates a normal run (``api.runs.scheduler``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from api.contract.crons import Cron, CronCount, CronCreate, CronSearch, CronSelected, CronUpdate
from api.http.checked_route import CheckedRoute, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.platform.validation import MAX_ID_LENGTH
from api.runs import cron_service

router = APIRouter(tags=["crons"], route_class=CheckedRoute)

CronId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="The schedule's id (a UUID).")
]


@router.post("/runs/crons", response_model=Cron, responses=responses(403, 404, 413, 422))
async def create_cron(body: CronCreate, svc: ServiceDep) -> Any:
    """A schedule whose every due time runs the assistant on a new thread (owned by you)."""
    return await cron_service.create(svc, body, None)


@router.post(
    "/threads/{thread_id}/runs/crons",
    response_model=Cron,
    responses=responses(403, 404, 413, 422),
)
async def create_thread_cron(thread_id: ThreadId, body: CronCreate, svc: ServiceDep) -> Any:
    """A schedule whose every due time runs the assistant on this thread (``enqueue``: behind
    an active run; ``reject``: that due time is skipped)."""
    return await cron_service.create(svc, body, thread_id)


@router.post(
    "/runs/crons/search",
    response_model=list[CronSelected],
    responses=responses(403, 413, 422),
)
async def search_crons(body: CronSearch, svc: ServiceDep) -> Any:
    """Your schedules, filtered; ``select`` names the fields each one has."""
    return await cron_service.search(svc, body)


@router.post("/runs/crons/count", response_model=int, responses=responses(403, 413, 422))
async def count_crons(body: CronCount, svc: ServiceDep) -> int:
    """How many of your schedules match."""
    return await cron_service.count(svc, body)


@router.patch("/runs/crons/{cron_id}", response_model=Cron, responses=responses(403, 404, 413, 422))
async def update_cron(cron_id: CronId, body: CronUpdate, svc: ServiceDep) -> Any:
    """Change a schedule: the fields sent replace its own (``end_time`` null clears it)."""
    return await cron_service.update(svc, cron_id, body)


@router.delete("/runs/crons/{cron_id}", status_code=204, responses=responses(403, 404, 422))
async def delete_cron(cron_id: CronId, svc: ServiceDep) -> Response:
    """Delete a schedule; runs it already queued go on."""
    await cron_service.delete(svc, cron_id)
    return Response(status_code=204)
