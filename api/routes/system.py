"""Health and information."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from fastapi import APIRouter

from api.deps import ServiceDep
from api.system_schemas import Health, Info
from api.validation import CheckedRoute

router = APIRouter(tags=["system"], route_class=CheckedRoute)


@router.get("/ok", response_model=Health)
async def ok(svc: ServiceDep) -> Any:
    """Liveness: the database answers."""
    async with svc.pool.connection() as conn:
        await conn.execute("SELECT 1")
    return {"ok": True}


@router.get("/info", responses={200: {"model": Info}})
async def info(svc: ServiceDep) -> Any:
    """Version, model in use, database mode, assistants."""
    rt = svc.runtime
    out = {
        "version": version("threadline"),
        "model": rt.settings.model_label,
        "database": rt.database.mode,
        "assistants": sorted(rt.graphs),
        "langgraph": version("langgraph"),
        "auth": svc.access.mode,
        "authentication": (
            "no authentication" if not svc.access.enabled else f"required ({svc.access.mode})"
        ),
        "insecure_no_auth": rt.settings.insecure_no_auth and not svc.access.enabled,
    }
    for adapter in rt.adapters.values():  # the built-in agent's sandbox and approval policy
        out.update(adapter.describe())
    return out
