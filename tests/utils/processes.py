"""Ports and processes on this machine: a free port for a server, and the tool processes a killed
server left behind in its data directory (they run in sessions of their own, so killing the
server does not reach them)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def processes_in(directory: str | Path) -> list[int]:
    """Live (non-zombie) processes, other than this one, working inside ``directory``.

    Linux only (reads ``/proc``); elsewhere none.
    """
    root = Path(directory).resolve()
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone, or not ours to look at
        if state != "Z" and cwd.is_relative_to(root):
            found.append(int(entry.name))
    return found


def kill_strays(data_dir: str | Path) -> list[int]:
    """SIGKILL processes working inside ``<data_dir>/workspaces`` (tools a killed server left);
    returns the pids it killed."""
    killed: list[int] = []
    for pid in processes_in(Path(data_dir) / "workspaces"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed
