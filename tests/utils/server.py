"""Real ``threadline serve`` processes for tests and the evaluation: started, killed, restarted.

:class:`ServerProcess` runs ``python -m cli serve`` in its own session (a kill never reaches the
test runner), logs to a file, and starts, kills (SIGKILL), terminates (SIGTERM) and restarts it on
the same port, so clients reconnect to the same URL. :func:`serving` wraps one start and stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx

from tests.utils.processes import free_port, kill_strays

LEAKY_ENV = (
    "DATABASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "OPENAI_TIMEOUT",
    "OPENAI_MAX_RETRIES",
    "OPENAI_MAX_TOKENS",
)
"""Variables ``Settings`` reads that a harness server must not inherit from the caller."""


class ServerStartError(RuntimeError):
    """The server did not answer ``GET /ok`` in time (the message ends with its log's tail)."""


def api_headers() -> dict[str, str]:
    """The credentials the evaluation sends: ``THREADLINE_API_KEY`` as ``x-api-key`` (a server
    with ``THREADLINE_AUTH=keys`` needs one); nothing when it is unset."""
    key = os.environ.get("THREADLINE_API_KEY")
    return {"x-api-key": key} if key else {}


def clean_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) without anything threadline's settings would read."""
    source = os.environ if base is None else base
    return {
        k: v
        for k, v in source.items()
        if k not in LEAKY_ENV
        and not (k.startswith("THREADLINE_") and k != "THREADLINE_TEST_DATABASE_URL")
    }


class ServerProcess:
    """One ``threadline serve`` process on a fixed port; a context manager that always kills it.

    ``env`` adds or overrides variables (``THREADLINE_MAX_BODY_BYTES``, ``OPENAI_*``, ...).
    ``stop()`` and the context manager's exit SIGKILL the process (and its process group).
    """

    def __init__(
        self,
        database_url: str,
        data_dir: str | Path,
        *,
        lease_seconds: float = 3.0,
        heartbeat_seconds: float = 0.5,
        poll_seconds: float = 0.2,
        config: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_path: str | Path | None = None,
        name: str = "server",
        startup_timeout: float = 30.0,
        ready_headers: Mapping[str, str] | None = None,
    ) -> None:
        """``ready_headers``: sent with the ``GET /ok`` that says the server is up (credentials,
        where a project's own ``/ok`` takes the API's place)."""
        self.data_dir = Path(data_dir)
        self.ready_headers = dict(ready_headers or {})
        self.host = host
        self.port = port or free_port(host)
        self.name = name
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path else self.data_dir / "logs" / f"{name}.log"
        self.env = clean_environ()
        self.env.update(
            {
                "DATABASE_URL": database_url,
                "THREADLINE_DATA_DIR": str(self.data_dir),
                "THREADLINE_LEASE_SECONDS": str(lease_seconds),
                "THREADLINE_HEARTBEAT_SECONDS": str(heartbeat_seconds),
                "THREADLINE_POLL_SECONDS": str(poll_seconds),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if config is not None:
            self.env["THREADLINE_CONFIG"] = str(config)
        self.env.update(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._groups: set[int] = set()

    # -- properties ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running process's id; None when it is not running."""
        return self.process.pid if self.running and self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "cli",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ServerProcess:
        """Start the process and wait until ``GET /ok`` answers 200."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start #{self.starts}: {' '.join(self.command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._groups.add(self.process.pid)
        try:
            self.wait_ready(self.startup_timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error = "no answer"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = self.process.returncode if self.process else None
                raise ServerStartError(
                    f"{self.name} exited with code {code} before answering /ok; log tail:\n"
                    + self.log_tail()
                )
            try:
                response = httpx.get(self.url + "/ok", headers=self.ready_headers, timeout=1.0)
                if response.status_code == 200:
                    return
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
            except httpx.HTTPError as err:
                last_error = repr(err)
            time.sleep(0.1)
        raise ServerStartError(
            f"{self.name} did not answer {self.url}/ok within {timeout:.0f} s ({last_error}); "
            "log tail:\n" + self.log_tail()
        )

    def kill(self) -> int | None:
        """SIGKILL the server process (not the tools it started: they have their own sessions,
        as after a real ``kill -9``) and wait for it; returns its exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        return process.wait(timeout=30)

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (graceful: running runs are handed back) and wait; SIGKILL after ``timeout``."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                return process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise
        return process.returncode

    def pause(self) -> None:
        """SIGSTOP: the process stays up but does nothing (no claims, no heartbeats) — a hung
        replica, whose leases expire."""
        if self.process is not None and self.running:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.process is not None and self.running:
            os.kill(self.process.pid, signal.SIGCONT)

    def restart(self, *, graceful: bool = False) -> ServerProcess:
        """Stop (SIGKILL, or SIGTERM when ``graceful``) and start again on the same port."""
        if graceful:
            self.terminate()
        else:
            self.kill()
        return self.start()

    def stop(self) -> None:
        """SIGKILL the process and whatever is left in the process groups it ever had."""
        self.kill()
        for group in self._groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        self._groups.clear()

    def __enter__(self) -> ServerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ServerProcess({self.name!r}, {self.url}, pid={self.pid})"


@contextlib.contextmanager
def serving(proc: ServerProcess) -> Iterator[ServerProcess]:
    """``proc`` started; on exit stopped, with the tool processes it left in its data dir."""
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        kill_strays(proc.data_dir)
