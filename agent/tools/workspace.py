"""Per-thread workspace directories and safe resolution of paths inside them.

Every path a model (or an HTTP client) names is resolved with :func:`resolve_inside`, which follows
symlinks before checking containment, so neither ``..`` nor a symlink can reach outside the
workspace.
"""

from __future__ import annotations

import errno
import os
import re
from collections import deque
from pathlib import Path, PurePosixPath
from typing import Any

from agent.tools.base import ToolError

_THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_EXAMPLES = "such as 'notes.txt' or 'src/app.py'"


class WorkspacePathError(ToolError):
    """A path that is malformed or resolves outside the workspace."""


def workspace_dir(data_dir: Path, thread_id: str) -> Path:
    """The workspace path for ``thread_id`` (not created); rejects ids that are not a safe name."""
    if not _THREAD_ID.fullmatch(thread_id):
        raise ValueError(
            f"Thread id {thread_id!r} cannot name a workspace: use letters, digits, '.', '_' "
            "or '-' (starting with a letter or digit, at most 200 characters)."
        )
    return data_dir / "workspaces" / thread_id


def ensure_workspace(data_dir: Path, thread_id: str) -> Path:
    """Create the workspace for ``thread_id`` if needed and return its resolved path."""
    path = workspace_dir(data_dir, thread_id)
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def resolve_inside(root: Path, user_path: str) -> Path:
    """Resolve a relative ``user_path`` under ``root`` (following symlinks) or raise."""
    if not user_path:
        raise WorkspacePathError(
            f"The path is empty. Use a path relative to the workspace root, {_EXAMPLES}, "
            "or '.' for the root itself."
        )
    if "\0" in user_path:
        raise WorkspacePathError(
            f"Path {user_path!r} contains a NUL byte. Use a plain relative path, {_EXAMPLES}."
        )
    if PurePosixPath(user_path).is_absolute() or Path(user_path).is_absolute():
        raise WorkspacePathError(
            f"Path {user_path!r} is absolute. Use a path relative to the workspace root, "
            f"{_EXAMPLES}."
        )
    real_root = root.resolve()
    try:
        resolved = (real_root / user_path).resolve()
    except (OSError, RuntimeError) as err:  # symlink loops: RuntimeError before 3.13
        raise WorkspacePathError(
            f"Path {user_path!r} cannot be resolved ({err}). Use a different path, {_EXAMPLES}."
        ) from err
    if not resolved.is_relative_to(real_root):
        raise WorkspacePathError(
            f"Path {user_path!r} is outside the workspace. Use a path relative to the workspace "
            f"root, {_EXAMPLES}."
        )
    return resolved


def _entry(real_root: Path, entry: os.DirEntry[str]) -> dict[str, Any]:
    """One listing row for a directory entry, without following symlinks."""
    rel = Path(entry.path).relative_to(real_root).as_posix()
    if entry.is_symlink():
        kind, size = "symlink", entry.stat(follow_symlinks=False).st_size
    elif entry.is_dir(follow_symlinks=False):
        kind, size = "dir", 0
    else:
        kind, size = "file", entry.stat(follow_symlinks=False).st_size
    return {"path": rel, "type": kind, "size": size}


def list_tree(root: Path, sub: str = ".", *, limit: int = 500) -> list[dict[str, Any]]:
    """Entries under ``sub`` (recursive, at most ``limit``), sorted by path relative to ``root``.

    Each entry is ``{"path", "type", "size"}`` with type ``"file"``, ``"dir"`` or ``"symlink"``;
    symlinks are listed, never followed. Raises :class:`WorkspacePathError` for a path outside
    ``root`` and ``FileNotFoundError`` when ``sub`` does not exist. A file ``sub`` lists itself.
    """
    real_root = root.resolve()
    start = resolve_inside(real_root, sub)
    if not start.exists():
        raise FileNotFoundError(sub)
    if not start.is_dir():
        rel = start.relative_to(real_root).as_posix()
        return [{"path": rel, "type": "file", "size": start.stat().st_size}]
    entries: list[dict[str, Any]] = []
    # Breadth first, so a listing cut at ``limit`` shows the shallow levels completely.
    pending: deque[Path] = deque([start])
    while pending and len(entries) < limit:
        directory = pending.popleft()
        try:
            with os.scandir(directory) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable directory: list what we can
        for child in children:
            if len(entries) >= limit:
                break
            try:
                row = _entry(real_root, child)
            except OSError:
                continue  # vanished while listing
            entries.append(row)
            if row["type"] == "dir":
                pending.append(Path(child.path))
    # Sorting by components keeps a directory's contents right after it ("a", "a/b", "a-c").
    return sorted(entries, key=lambda e: e["path"].split("/"))


def open_inside(root: Path, target: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` a path :func:`resolve_inside` returned, and make sure the file opened is that
    one: sandboxed commands write the workspace while the server's tools and routes read it, so a
    path could be swapped for a symlink between the check and the open. The last component is
    opened with ``O_NOFOLLOW`` and the descriptor's real path must still be inside ``root``;
    otherwise it is closed and :class:`WorkspacePathError` raised (nothing was written: open
    without ``O_TRUNC`` and truncate the descriptor afterwards)."""
    try:
        fd = os.open(target, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise WorkspacePathError(
                f"{target.name!r} became a symbolic link while it was being opened; try again."
            ) from None
        raise
    try:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:  # no /proc: the O_NOFOLLOW check is what there is
        return fd
    if not real.is_relative_to(root.resolve()):
        os.close(fd)
        raise WorkspacePathError(
            f"{target.name!r} moved outside the workspace while it was being opened; not used."
        )
    return fd
