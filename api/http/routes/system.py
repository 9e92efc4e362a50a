"""Health and information."""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

from fastapi import APIRouter, Query

from api.contract.system import Health, Info
from api.http.checked_route import CheckedRoute
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.platform.database import Pool
from api.platform.db_health import DatabaseUnavailable

router = APIRouter(tags=["system"], route_class=CheckedRoute)

OK_SECONDS = 5.0
"""How long ``/ok`` waits for the database before it answers ``503``."""


@router.get("/ok", response_model=Health, responses=responses(422, 503))
async def ok(
    svc: ServiceDep,
    check_db: int = Query(
        0,
        ge=0,
        le=1,
        description="LangGraph Server's parameter, accepted: the database is always asked.",
    ),
) -> Any:
    """Health: ``200`` while the database answers, ``503`` with ``Retry-After`` (at once, or
    within a few seconds of an outage's start) while it does not."""
    # While an outage is known the pool refuses at once (DatabaseUnavailable); a fault here
    # answers 503 too (api.platform.errors), and so does a server that does not answer in time (a
    # hung
    # host, a network that drops packets).
    check = asyncio.ensure_future(_select_one(svc.pool))
    await asyncio.wait([check], timeout=OK_SECONDS)
    if not check.done():
        # Not cancelled: cancelling a statement the server does not answer waits for the
        # server too. It ends when the server answers or its connection is given up.
        check.add_done_callback(lambda task: task.cancelled() or task.exception())
        hung = DatabaseUnavailable(f"it did not answer within {OK_SECONDS:g} s")
        svc.pool.health.fault(hung)  # from now on the pool refuses at once, if it still hangs
        raise hung
    check.result()
    return {"ok": True, "database": "up"}


async def _select_one(pool: Pool) -> None:
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")


@router.get("/info", responses={200: {"model": Info}})
async def info(svc: ServiceDep) -> Any:
    """Version, model in use, database mode, assistants."""
    rt = svc.runtime
    out = {
        "version": version("threadline"),
        "database": rt.database.mode,
        "assistants": sorted(rt.graphs),
        "langgraph": version("langgraph"),
        "auth": svc.access.mode,
        "authentication": (
            "no authentication" if not svc.access.enabled else f"required ({svc.access.mode})"
        ),
        "insecure_no_auth": rt.settings.insecure_no_auth and not svc.access.enabled,
    }
    for adapter in rt.adapters.values():  # the built-in agent's model, sandbox, approval policy
        out.update(adapter.describe())
    return out
