"""The built-in agent's routes: its tasks, and a thread's workspace (list its files, read one)."""

from __future__ import annotations

import mimetypes
import os
import stat
from collections.abc import Iterator
from pathlib import Path as FsPath
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Path, Response
from fastapi.responses import StreamingResponse

from agent.tools import WorkspacePathError, list_tree, resolve_inside, workspace_dir
from agent.tools.workspace import open_inside
from api.builtin_agent import BUILTIN_ASSISTANT
from api.builtin_agent.adapter import BuiltinAgent
from api.contract.threads import WorkspaceListing
from api.http.checked_route import CheckedRoute, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.platform.errors import Invalid, NotFound
from api.platform.validation import MAX_WORKSPACE_PATH

router = APIRouter(tags=["workspace"], route_class=CheckedRoute)

READ_WHOLE = 16 * 1024 * 1024
"""Files up to this size are read once and sent with exactly those bytes (a tool may be
appending meanwhile); larger ones are streamed as they are read, without a Content-Length."""
CHUNK = 256 * 1024
MAX_NAME_BYTES = 255
WorkspacePath = Annotated[
    str,
    Path(
        max_length=MAX_WORKSPACE_PATH,
        description=f"A path relative to the workspace root, at most {MAX_WORKSPACE_PATH} "
        f"characters, each part at most {MAX_NAME_BYTES} bytes.",
    ),
]


def agent_of(svc: ServiceDep) -> BuiltinAgent:
    adapter = svc.runtime.adapter(BUILTIN_ASSISTANT)
    assert isinstance(adapter, BuiltinAgent)
    return adapter


@router.get("/tasks", tags=["system"])
async def list_tasks(svc: ServiceDep) -> Any:
    """The tasks the built-in agent can be given (shipped and the operator's), and their
    parameters."""
    return agent_of(svc).tasks.describe()


def _root(svc: ServiceDep, thread_id: str) -> Any:
    try:
        return workspace_dir(svc.runtime.settings.data_dir, thread_id)
    except ValueError as err:
        raise NotFound(f"Thread {thread_id!r} has no workspace: {err}") from None


@router.get(
    "/threads/{thread_id}/workspace",
    response_model=WorkspaceListing,
    responses=responses(404, 422),
)
async def list_workspace(thread_id: ThreadId, svc: ServiceDep) -> Any:
    """Files in the thread's workspace (empty before its first run)."""
    await svc.thread(thread_id, values=False)
    root = _root(svc, thread_id)
    if not root.exists():
        return {"files": []}
    files = list_tree(root.resolve())
    for entry in files:  # a name a tool made that is not UTF-8 must not break the listing
        entry["path"] = entry["path"].encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return {"files": files}


@router.get(
    "/threads/{thread_id}/workspace/{path:path}",
    response_class=Response,
    responses={
        200: {
            "description": "The file's bytes; the content type is guessed from its name.",
            "content": {"*/*": {"schema": {}}},
        },
        **responses(404, 422),
    },
)
async def read_workspace_file(thread_id: ThreadId, path: WorkspacePath, svc: ServiceDep) -> Any:
    """One file of the workspace (paths are confined to it, as for the tools)."""
    await svc.thread(thread_id, values=False)
    long = [p for p in path.split("/") if len(p.encode("utf-8", "replace")) > MAX_NAME_BYTES]
    if long:
        raise Invalid(
            f"Path part {long[0][:40]!r}... is longer than {MAX_NAME_BYTES} bytes, which no file "
            "name can be; GET .../workspace lists the files."
        )
    root = _root(svc, thread_id)
    if not root.exists():
        raise NotFound(f"Thread {thread_id!r} has no workspace yet.")
    try:
        target = resolve_inside(root.resolve(), path)
    except WorkspacePathError as err:
        raise Invalid(str(err)) from None
    missing = NotFound(f"No file {path!r} in the workspace; GET .../workspace lists the files.")
    try:
        opened = await anyio.to_thread.run_sync(_open, root, target)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise missing from None
    except WorkspacePathError as err:
        raise Invalid(str(err)) from None
    except OSError as err:
        raise Invalid(f"File {path!r} cannot be read ({err.strerror or err}).") from None
    media_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if isinstance(opened, bytes):
        return Response(opened, media_type=media_type)
    return StreamingResponse(_chunks(opened), media_type=media_type)


def _open(root: FsPath, target: FsPath) -> bytes | int:
    """A regular file's bytes, read once (so a file that grows meanwhile is sent as it was),
    or for a large one its open descriptor, to stream."""
    # Non-blocking: opening a FIFO a tool left there must not wait for a writer.
    fd = open_inside(root, target, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(str(target))
        if info.st_size > READ_WHOLE:
            keep, fd = fd, -1
            return keep
        parts = []
        while chunk := os.read(fd, CHUNK):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        if fd >= 0:
            os.close(fd)


def _chunks(fd: int) -> Iterator[bytes]:
    try:
        while chunk := os.read(fd, CHUNK):
            yield chunk
    finally:
        os.close(fd)
