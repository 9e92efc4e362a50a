"""``threadline serve`` on the embedded PostgreSQL, stopped as a service manager stops it.

SIGTERM is a normal stop: the server hands its runs back, exits with status 0, and stops the
embedded PostgreSQL it used unless another live process still uses it. ``kill -9`` leaves the
PostgreSQL running, and the next start adopts it (``api.platform.embedded``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.platform.embedded import user_alive
from tests.utils.db import TEST_DATABASE_ENV, embedded_data_dir
from tests.utils.processes import processes_in
from tests.utils.server import ServerProcess

pytestmark = pytest.mark.slow

STOP_WITHIN = 15.0
"""Seconds PostgreSQL's processes may take to go after the last user exited."""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory outside ``tmp_path`` (see ``embedded_data_dir``). A PostgreSQL a failed
    test left running is stopped (fast shutdown) before the directory goes."""
    with embedded_data_dir() as parent:
        data_dir = parent / "data"
        try:
            yield data_dir
        finally:
            pid = postmaster_pid(data_dir)
            if pid is not None and alive(pid):
                os.kill(pid, signal.SIGINT)
                deadline = time.monotonic() + STOP_WITHIN
                while alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)


def embedded_serve(data_dir: Path, name: str) -> ServerProcess:
    """``threadline serve`` with no database URL: it starts (or reuses) the embedded server."""
    server = ServerProcess("", data_dir, name=name, startup_timeout=90)
    for variable in ("DATABASE_URL", TEST_DATABASE_ENV):
        server.env.pop(variable, None)
    return server


def postmaster_pid(data_dir: Path) -> int | None:
    """The pid in ``postmaster.pid`` (PostgreSQL removes the file when it stops cleanly)."""
    try:
        return int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0])
    except FileNotFoundError:
        return None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    return user_alive(pid, None)


def assert_stopped(data_dir: Path, pid: int) -> None:
    deadline = time.monotonic() + STOP_WITHIN
    while alive(pid) or processes_in(data_dir / "postgres"):
        assert time.monotonic() < deadline, f"PostgreSQL ({pid}) still runs in {data_dir}"
        time.sleep(0.05)
    assert postmaster_pid(data_dir) is None


def answers(server: ServerProcess) -> None:
    """``/ok`` and a request that writes to the database both succeed."""
    assert httpx.get(server.url + "/ok", timeout=10).status_code == 200
    assert httpx.post(server.url + "/threads", json={}, timeout=10).status_code == 200


def test_sigterm_stops_the_embedded_postgres_serve_started(data_dir: Path) -> None:
    with embedded_serve(data_dir, "only") as server:
        pid = postmaster_pid(data_dir)
        assert pid is not None and alive(pid)
        assert server.terminate() == 0, server.log_tail()
    assert_stopped(data_dir, pid)


def test_sigterm_of_one_serve_leaves_postgres_to_the_other_until_it_stops_too(
    data_dir: Path,
) -> None:
    with embedded_serve(data_dir, "a") as first, embedded_serve(data_dir, "b") as second:
        pid = postmaster_pid(data_dir)
        assert pid is not None
        assert first.terminate() == 0, first.log_tail()
        assert postmaster_pid(data_dir) == pid and alive(pid), "stopped under a live user"
        answers(second)
        assert second.terminate() == 0, second.log_tail()
    assert_stopped(data_dir, pid)


def test_kill_9_leaves_postgres_that_the_next_serve_adopts_and_stops(data_dir: Path) -> None:
    with embedded_serve(data_dir, "killed") as killed:
        pid = postmaster_pid(data_dir)
        assert pid is not None
        killed.kill()  # kill -9: no exit handler runs
    assert alive(pid), "PostgreSQL should outlive a killed server"
    with embedded_serve(data_dir, "next") as after:
        assert postmaster_pid(data_dir) == pid  # the same server, not a new one
        assert "adopting the embedded PostgreSQL" in after.log_tail(400)
        answers(after)
        assert after.terminate() == 0, after.log_tail()
    assert_stopped(data_dir, pid)
