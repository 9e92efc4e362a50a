"""``POST /runs/cancel``: cancel several runs at once (the SDKs' ``runs.cancel_many``)."""

from __future__ import annotations

import contextlib
from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Query, Response
from pydantic import Field, model_validator

from api.contract.runs import Id, Strict
from api.engine.rollback import roll_back
from api.http.checked_route import CheckedRoute
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.platform.errors import ApiError
from api.store.active_runs import active_runs

router = APIRouter(tags=["runs"], route_class=CheckedRoute)

STATUSES = {"pending": ["pending"], "running": ["running"], "all": ["pending", "running"]}


class BulkCancel(Strict):
    """Runs of one thread (all its active ones, or ``run_ids`` of it), or every active run of
    the caller's threads in ``status``."""

    thread_id: Id | None = None
    run_ids: list[UUID] | None = Field(None, max_length=1000)
    status: Literal["pending", "running", "all"] | None = None

    @model_validator(mode="after")
    def names_runs(self) -> BulkCancel:
        if self.thread_id is None and self.status is None:
            raise ValueError(
                'name the runs to cancel: "thread_id" (with "run_ids" or not), or "status" '
                '("pending", "running" or "all") for every active run of your threads'
            )
        return self


@router.post("/runs/cancel", status_code=204, responses=responses(404, 413, 422))
async def cancel_many(
    body: BulkCancel,
    svc: ServiceDep,
    action: Annotated[Literal["interrupt", "rollback"], Query()] = "interrupt",
) -> Response:
    """Cancel the named active runs (each as ``POST .../cancel`` does); ``action=rollback`` also
    removes them and their checkpoints once they have stopped. Runs that finished meanwhile
    are left as they are."""
    if body.thread_id is not None:
        await svc.thread(body.thread_id, "update", values=False)  # another tenant's thread: 404
    scope = await svc.scope("update")
    async with svc.pool.connection() as conn:
        found = await active_runs(
            conn,
            statuses=STATUSES[body.status or "all"],
            scope=scope.where("t"),
            thread_id=body.thread_id,
            run_ids=[str(r) for r in body.run_ids] if body.run_ids else None,
        )
    for thread_id, run_id in found:
        with contextlib.suppress(ApiError):  # finished meanwhile: nothing to cancel
            await svc.cancel(thread_id, run_id)
    if action == "rollback":
        for thread_id, run_id in found:
            await svc.wait_for_end(run_id)
            await roll_back(svc.pool, thread_id, [run_id])
    return Response(status_code=204)
