"""What happened to each external MCP call that may change something, on disk, so that a call is
not sent twice when the process dies between the server's effect and the run's record of it.

The tools node's hooks answer a call whose result was recorded in the audit log; this journal
covers what they cannot see: a call that was sent but whose result was never recorded. Before a
non-read-only call is sent its entry says ``sent``; once the server answers it holds the result.
A later attempt of the same call (same idempotency key) then

- gets the journaled result, without calling the server again, when the answer had arrived;
- gets an error saying the call was sent and its outcome is unknown (check, then decide), when
  it had not, unless the server (trusted) says the tool is idempotent: then it is sent again.

Entries live outside the workspace (nothing the agent's tools or the server's repository can
see): ``<data_dir>/mcp-calls/<thread_id>/<sha256 of the key>.json`` for a workspace at
``<data_dir>/workspaces/<thread_id>``, else ``.mcp-calls/<name>/`` next to the workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

SENT = "sent"
ANSWERED = "answered"


def journal_dir(workspace: Path) -> Path:
    if workspace.parent.name == "workspaces":
        return workspace.parent.parent / "mcp-calls" / workspace.name
    return workspace.parent / ".mcp-calls" / workspace.name


def entry_path(workspace: Path, key: str) -> Path:
    """The entry of the call with idempotency key ``key`` (callers add the server and tool to the
    key, so that one key reused for another tool is another call)."""
    return journal_dir(workspace) / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def call_key(key: str, server: str, tool: str) -> str:
    """The journal's key of one call: its idempotency key, server and remote tool."""
    return f"{key}\0{server}\0{tool}"


def read_entry(workspace: Path, key: str) -> dict[str, Any] | None:
    """The call's entry, or None when no attempt of it was sent (an unreadable one counts as
    sent: a torn write happened at the moment the call was about to go out)."""
    path = entry_path(workspace, key)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        entry = json.loads(text)
    except ValueError:
        return {"state": SENT}
    return entry if isinstance(entry, dict) else {"state": SENT}


def write_entry(workspace: Path, key: str, entry: dict[str, Any]) -> None:
    """Replace the call's entry atomically and durably (OSError when it cannot be written)."""
    path = entry_path(workspace, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    data = json.dumps({**entry, "key": key, "at": time.time()}, ensure_ascii=False)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def mark_sent(workspace: Path, key: str, server: str, tool: str) -> None:
    write_entry(workspace, key, {"state": SENT, "server": server, "tool": tool})


def mark_answered(workspace: Path, key: str, server: str, tool: str, ok: bool, text: str) -> None:
    entry = {"state": ANSWERED, "server": server, "tool": tool, "ok": ok, "text": text}
    write_entry(workspace, key, entry)
