"""The thread's workspace: list its files, read one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse

from agent.tools import WorkspacePathError, list_tree, resolve_inside, workspace_dir
from api.deps import ServiceDep
from api.errors import Invalid, NotFound

router = APIRouter(tags=["workspace"])


def _root(svc: ServiceDep, thread_id: str) -> Any:
    try:
        return workspace_dir(svc.runtime.settings.data_dir, thread_id)
    except ValueError as err:
        raise NotFound(f"Thread {thread_id!r} has no workspace: {err}") from None


@router.get("/threads/{thread_id}/workspace")
async def list_workspace(thread_id: str, svc: ServiceDep) -> Any:
    """Files in the thread's workspace (empty before its first run)."""
    await svc.thread(thread_id)
    root = _root(svc, thread_id)
    if not root.exists():
        return {"files": []}
    return {"files": list_tree(root.resolve())}


@router.get("/threads/{thread_id}/workspace/{path:path}")
async def read_workspace_file(thread_id: str, path: str, svc: ServiceDep) -> Any:
    """One file of the workspace (paths are confined to it, as for the tools)."""
    await svc.thread(thread_id)
    root = _root(svc, thread_id)
    if not root.exists():
        raise NotFound(f"Thread {thread_id!r} has no workspace yet.")
    try:
        target = resolve_inside(root.resolve(), path)
    except WorkspacePathError as err:
        raise Invalid(str(err)) from None
    if not target.is_file():
        raise NotFound(f"No file {path!r} in the workspace; GET .../workspace lists the files.")
    return FileResponse(target)
