"""The files a run leaves in its thread's workspace, under a server's data directory."""

from __future__ import annotations

from pathlib import Path


def workspace_path(data_dir: str | Path, thread_id: str, name: str = "") -> Path:
    """``name`` in the thread's workspace (the workspace itself when ``name`` is empty)."""
    return Path(data_dir) / "workspaces" / thread_id / name


def counter_lines(data_dir: str | Path, thread_id: str) -> list[str]:
    """The non-empty lines of the thread's ``counter.txt`` (empty when it does not exist yet)."""
    try:
        text = workspace_path(data_dir, thread_id, "counter.txt").read_text()
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]
