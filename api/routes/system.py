"""Health and information."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from fastapi import APIRouter

from api.deps import ServiceDep

router = APIRouter(tags=["system"])


@router.get("/ok")
async def ok(svc: ServiceDep) -> Any:
    """Liveness: the database answers."""
    async with svc.pool.connection() as conn:
        await conn.execute("SELECT 1")
    return {"ok": True}


@router.get("/info")
async def info(svc: ServiceDep) -> Any:
    """Version, model in use, database mode, assistants."""
    rt = svc.runtime
    return {
        "version": version("threadline"),
        "model": rt.settings.model_label,
        "database": rt.database.mode,
        "assistants": sorted(rt.graphs),
        "langgraph": version("langgraph"),
    }


@router.post("/assistants/search")
async def search_assistants(svc: ServiceDep) -> Any:
    """The served graphs, as assistants (one per graph, id = graph id)."""
    return [
        {"assistant_id": gid, "graph_id": gid, "name": gid, "config": {}, "metadata": {}}
        for gid in sorted(svc.runtime.graphs)
    ]


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, svc: ServiceDep) -> Any:
    """One served graph, as an assistant."""
    svc.graph(assistant_id)
    return {
        "assistant_id": assistant_id,
        "graph_id": assistant_id,
        "name": assistant_id,
        "config": {},
        "metadata": {},
    }


@router.get("/tasks")
async def list_tasks() -> Any:
    """The demo tasks the built-in agent ships with, and their parameters."""
    from agent.tasks import CATALOG

    return [task.describe() for task in CATALOG.values()]
