"""The kill harness: real server processes, ``kill -9`` at chosen moments, what a client saw.

Shared by the tests (``tests/api``) and the evaluation's crash mode:

- :class:`ServerProcess` runs ``python -m cli serve`` in its own session (a kill never reaches
  the test runner), logs to a file, and starts, kills (SIGKILL), terminates (SIGTERM) and
  restarts it on the same port, so clients reconnect to the same URL.
- :func:`read_sse` parses a raw SSE response into :class:`SSEEvent` tuples (comments included).
- :class:`StreamFollower` reads one run's stream to its ``end`` the way a browser's
  ``EventSource`` does: on any drop it reconnects (to the same or another replica) with
  ``Last-Event-ID``, and keeps every event it received, duplicates included, so a check can tell
  "each event exactly once" from "at least once".
- :func:`run_with_kills` starts a run, SIGKILLs the server at the moments a :class:`KillPlan`
  names (``counter.txt`` has k lines, the n-th matching event was seen, t seconds passed),
  restarts it, and returns an :class:`Outcome`: final run status, thread, ``counter.txt``, every
  event read, and :meth:`Outcome.problems` — what broke the durability contract, if anything.
  :meth:`KillPlan.random` draws random moments for the evaluation's crash mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from api.store.claim_sql import progress_mark

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

STREAM_MODES = ("updates", "custom")


class ServerStartError(RuntimeError):
    """The server did not answer ``GET /ok`` in time (the message ends with its log's tail)."""


def api_headers() -> dict[str, str]:
    """The credentials the evaluation sends: ``THREADLINE_API_KEY`` as ``x-api-key`` (a server
    with ``THREADLINE_AUTH=keys`` needs one); nothing when it is unset."""
    key = os.environ.get("THREADLINE_API_KEY")
    return {"x-api-key": key} if key else {}


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


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


@contextlib.contextmanager
def serving(proc: ServerProcess) -> Iterator[ServerProcess]:
    """``proc`` started; on exit stopped, with the tool processes it left in its data dir."""
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()
        kill_strays(proc.data_dir)


def kill_strays(data_dir: str | Path) -> list[int]:
    """SIGKILL processes working inside ``<data_dir>/workspaces`` (tools a killed server left);
    returns the pids it killed."""
    killed: list[int] = []
    for pid in processes_in(Path(data_dir) / "workspaces"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


# -- kills that would end runs ----------------------------------------------------------------

STALLING_AGAIN = f"""
SELECT r.run_id, r.worker_id FROM runs r
WHERE r.status = 'running' AND r.stalled_attempts >= 1
  AND r.progress = {progress_mark("r.thread_id")}
"""


async def stalling_again(conn: Any) -> dict[str, str]:
    """Running runs whose previous attempt saved nothing and whose current attempt has saved
    nothing yet either (run id → worker id).

    The service ends a run after ``THREADLINE_MAX_ATTEMPTS`` attempts in a row that saved
    nothing: a run killed at the same step every time. A kill at random moments stalls an
    attempt now and then (one killed before its first save); killing these runs now could
    stall them twice or more in a row, which the soak and the crash mode avoid (they measure
    durability, not that limit): they hold a kill until no run the kill would hit is one of
    these. Then no run ever has more than one stalled attempt in a row, under any limit above 1.
    """
    cur = await conn.execute(STALLING_AGAIN)
    return {str(row["run_id"]): str(row["worker_id"]) for row in await cur.fetchall()}


async def wait_until_no_run_stalls_again(
    database_url: str, pid: int | None = None, *, timeout: float = 60.0
) -> bool:
    """Wait until :func:`stalling_again` names no run (held by ``pid`` when given); False when
    ``timeout`` passed first (a run that does not move on: the kill goes ahead)."""
    import psycopg
    from psycopg.rows import dict_row

    deadline = time.monotonic() + timeout
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        while True:
            held = await stalling_again(conn)
            if pid is not None:
                held = {r: w for r, w in held.items() if f"/{pid}/" in w}
            if not held:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)


# -- SSE --------------------------------------------------------------------------------------


class SSEEvent(NamedTuple):
    """One SSE frame: ``id``, ``event``, ``data`` (decoded when it is JSON); or a comment."""

    id: str | None
    event: str | None
    data: Any
    comment: str | None = None

    @property
    def is_comment(self) -> bool:
        return self.comment is not None

    @property
    def seq(self) -> int | None:
        try:
            return int(self.id) if self.id is not None else None
        except ValueError:
            return None


def _decode(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data


async def read_sse(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """The frames of a streaming ``httpx`` response, in order; comments as their own items."""
    event_id: str | None = None
    event: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        line = line.rstrip("\r\n")
        if not line:
            if data or event is not None or event_id is not None:
                yield SSEEvent(event_id, event or "message", _decode("\n".join(data)))
            event_id, event, data = None, None, []
            continue
        if line.startswith(":"):
            yield SSEEvent(None, None, None, comment=line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)
        # "retry" and unknown fields are ignored, as EventSource does.
    if data or event is not None:
        yield SSEEvent(event_id, event or "message", _decode("\n".join(data)))


# -- files ------------------------------------------------------------------------------------


def workspace_path(data_dir: str | Path, thread_id: str, name: str = "") -> Path:
    return Path(data_dir) / "workspaces" / thread_id / name


def counter_lines(data_dir: str | Path, thread_id: str) -> list[str]:
    """The non-empty lines of the thread's ``counter.txt`` (empty when it does not exist yet)."""
    try:
        text = workspace_path(data_dir, thread_id, "counter.txt").read_text()
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


# -- following a run's stream -----------------------------------------------------------------


def _url(target: ServerProcess | str) -> str | None:
    if isinstance(target, ServerProcess):
        return target.url if target.running else None
    return target


@dataclass
class StreamFollower:
    """Reads a run's join stream until ``end``, reconnecting with ``Last-Event-ID`` on any drop.

    ``targets`` are servers (skipped while not running) or base URLs; after a drop the follower
    tries them in turn from the next one, so with replicas it also fails over.
    """

    thread_id: str
    run_id: str
    last_event_id: int | None = None
    """Resume after this id; None starts from the first event (sends ``Last-Event-ID: -1``)."""
    stream_mode: Sequence[str] | None = None
    events: list[SSEEvent] = field(default_factory=list)
    connections: int = 0
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def path(self) -> str:
        return f"/threads/{self.thread_id}/runs/{self.run_id}/stream"

    async def follow(
        self,
        targets: Sequence[ServerProcess | str],
        *,
        timeout: float = 120.0,
        retry_delay: float = 0.1,
    ) -> list[SSEEvent]:
        """Read until the ``end`` event (TimeoutError after ``timeout``); returns ``events``."""
        async with asyncio.timeout(timeout):
            current = 0
            params = {"stream_mode": list(self.stream_mode)} if self.stream_mode else None
            async with httpx.AsyncClient(
                timeout=httpx.Timeout(10.0, read=30.0), headers=api_headers()
            ) as client:
                while not self.ended:
                    url = _url(targets[current])
                    if url is not None:
                        last = "-1" if self.last_event_id is None else str(self.last_event_id)
                        # The server died or dropped us: reconnect.
                        with contextlib.suppress(httpx.TransportError):
                            await self._read_once(client, url, last, params)
                    if not self.ended:
                        current = (current + 1) % len(targets)
                        await asyncio.sleep(retry_delay)
        return self.events

    async def _read_once(self, client: httpx.AsyncClient, url: str, last: str, params: Any) -> None:
        async with client.stream(
            "GET", url + self.path, headers={"Last-Event-ID": last}, params=params
        ) as response:
            if response.status_code == 503:  # the database is down: retry as told
                await asyncio.sleep(float(response.headers.get("Retry-After") or 1))
                return
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                raise AssertionError(
                    f"GET {url}{self.path} answered {response.status_code}: {body}"
                )
            self.connections += 1
            async for frame in read_sse(response):
                self._take(frame)
                if self.ended:
                    return

    def _take(self, frame: SSEEvent) -> None:
        if frame.is_comment:  # a heartbeat
            return
        self.events.append(frame)
        if frame.seq is not None:
            self.last_event_id = frame.seq
        if frame.event == "end":
            self.ended = True
        self.changed.set()


# -- the kill plan ----------------------------------------------------------------------------


@dataclass
class KillPoint:
    """One moment to SIGKILL a server: when any condition given holds (all None: at once)."""

    counter_lines: int | None = None
    """``counter.txt`` of the run's thread has at least this many lines."""
    event: Callable[[SSEEvent], bool] | None = None
    nth: int = 1
    """... or the ``nth`` distinct event matching ``event`` has been read."""
    after_seconds: float | None = None
    """... or this long passed since the run was created or the previous restart finished."""
    target: int = 0
    """Index of the server to kill (``servers[target]``)."""
    restart: bool = True
    restart_delay: float = 0.0
    """Seconds to stay down before restarting."""
    label: str = ""

    def describe(self) -> str:
        if self.label:
            return self.label
        parts = []
        if self.counter_lines is not None:
            parts.append(f"counter.txt has {self.counter_lines} line(s)")
        if self.event is not None:
            parts.append(f"event #{self.nth} matching {getattr(self.event, '__name__', 'pred')}")
        if self.after_seconds is not None:
            parts.append(f"{self.after_seconds:.2f} s")
        return " or ".join(parts) or "at once"


def is_custom(kind: str) -> Callable[[SSEEvent], bool]:
    """A predicate: a ``custom`` event of ``type`` ``kind`` (``tool_started``, ``step``, ...)."""

    def predicate(ev: SSEEvent) -> bool:
        return ev.event == "custom" and isinstance(ev.data, dict) and ev.data.get("type") == kind

    predicate.__name__ = f"custom:{kind}"
    return predicate


def is_update_from(node: str) -> Callable[[SSEEvent], bool]:
    """A predicate: an ``updates`` event from ``node`` (``agent``, ``tools``, ``verify``)."""

    def predicate(ev: SSEEvent) -> bool:
        return ev.event == "updates" and isinstance(ev.data, dict) and node in ev.data

    predicate.__name__ = f"updates:{node}"
    return predicate


@dataclass
class KillPlan:
    points: list[KillPoint] = field(default_factory=list)

    @classmethod
    def random(
        cls,
        rng: random.Random,
        *,
        kills: int = 1,
        max_lines: int | None = None,
        max_seconds: float = 3.0,
        restart_delay: float = 0.0,
    ) -> KillPlan:
        """``kills`` random moments: a random line count of ``counter.txt`` (when ``max_lines``
        is given, half of the time; non-decreasing along the plan) or a random delay up to
        ``max_seconds`` after the previous restart. A count already reached fires right after
        the restart: a kill during recovery, a moment worth testing too."""
        kinds = [bool(max_lines) and rng.random() < 0.5 for _ in range(kills)]
        lines = iter(sorted(rng.randint(0, max_lines or 0) for k in kinds if k))
        points = []
        for by_lines in kinds:
            if by_lines:
                points.append(KillPoint(counter_lines=next(lines), restart_delay=restart_delay))
            else:
                points.append(
                    KillPoint(
                        after_seconds=round(rng.uniform(0.05, max_seconds), 3),
                        restart_delay=restart_delay,
                    )
                )
        return cls(points)


@dataclass
class KillRecord:
    point: str
    at: float
    """Seconds since the run was created."""
    events_seen: int
    counter_lines: int
    pid: int | None
    server: str


@dataclass
class Outcome:
    """What happened to one run under a kill plan, as the service and a client saw it."""

    thread_id: str
    run_id: str
    status: str | None
    run: dict[str, Any]
    thread: dict[str, Any]
    events: list[SSEEvent]
    counter: list[str]
    kills: list[KillRecord]
    connections: int
    elapsed: float
    error: str | None = None

    @property
    def ids(self) -> list[int]:
        return [e.seq for e in self.events if e.seq is not None]

    @property
    def attempts(self) -> list[int]:
        return [
            int(e.data["attempt"])
            for e in self.events
            if e.event == "metadata" and isinstance(e.data, dict) and "attempt" in e.data
        ]

    @property
    def end(self) -> SSEEvent | None:
        ends = [e for e in self.events if e.event == "end"]
        return ends[-1] if ends else None

    def problems(
        self, *, counter_n: int | None = None, expect_status: str | None = "success"
    ) -> list[str]:
        """Every way the run broke the contract; empty when it kept it.

        Checks: the run ended (with ``expect_status``); the client read each event exactly once
        with ids 1..N contiguous and ``end`` last; attempts grew; ``counter.txt`` holds 1..n once.
        """
        out: list[str] = []
        if self.error:
            out.append(self.error)
        if expect_status is not None and self.status != expect_status:
            out.append(f"run status {self.status!r}, expected {expect_status!r}")
        ids = self.ids
        dups = sorted({i for i in ids if ids.count(i) > 1})
        if dups:
            out.append(f"events read more than once: ids {dups}")
        if ids != list(range(1, len(ids) + 1)) and not dups:
            out.append(f"event ids not contiguous from 1: {ids}")
        end = self.end
        if end is None or self.events[-1] is not end:
            out.append("the stream did not end with an 'end' event")
        elif isinstance(end.data, dict) and end.data.get("status") != self.status:
            out.append(f"the end event says {end.data}, the run says {self.status!r}")
        attempts = self.attempts
        if not attempts or attempts[0] < 1 or attempts != sorted(set(attempts)):
            out.append(f"metadata attempts {attempts} are not increasing from the first")
        if counter_n is not None:
            want = [str(i) for i in range(1, counter_n + 1)]
            if sorted(self.counter, key=_int_or_str) != want:
                out.append(
                    f"counter.txt holds {self.counter}, expected each of 1..{counter_n} once"
                )
        return out


def _int_or_str(value: str) -> tuple[int, Any]:
    try:
        return (0, int(value))
    except ValueError:
        return (1, value)


async def _create_run(
    base: str,
    *,
    input: Any,
    assistant_id: str,
    stream_mode: Sequence[str],
    config: dict[str, Any] | None,
    thread_id: str | None,
) -> tuple[str, str]:
    async with httpx.AsyncClient(base_url=base, timeout=30.0, headers=api_headers()) as client:
        body: dict[str, Any] = {"metadata": {"harness": "kill"}}
        if thread_id:
            body["thread_id"] = thread_id
        response = await client.post("/threads", json=body)
        response.raise_for_status()
        tid = response.json()["thread_id"]
        response = await client.post(
            f"/threads/{tid}/runs",
            json={
                "assistant_id": assistant_id,
                "input": input,
                "stream_mode": list(stream_mode),
                "config": config or {},
            },
        )
        if response.status_code != 200:
            raise AssertionError(
                f"creating the run answered {response.status_code}: {response.text}"
            )
        return tid, response.json()["run_id"]


async def _get_json(targets: Sequence[ServerProcess], path: str) -> dict[str, Any]:
    for server in targets:
        if server.running:
            async with httpx.AsyncClient(
                base_url=server.url, timeout=30.0, headers=api_headers()
            ) as client:
                response = await client.get(path)
                response.raise_for_status()
                result: dict[str, Any] = response.json()
                return result
    raise RuntimeError("no server is running")


async def run_with_kills(
    servers: ServerProcess | Sequence[ServerProcess],
    input: Any,
    plan: KillPlan | None = None,
    *,
    assistant_id: str = "agent",
    stream_mode: Sequence[str] = STREAM_MODES,
    config: dict[str, Any] | None = None,
    thread_id: str | None = None,
    timeout: float = 120.0,
) -> Outcome:
    """Create a run on ``servers[0]``, follow its stream like a reconnecting client, SIGKILL
    servers at the plan's moments (restarting them unless a point says not to), and report.

    Never raises for what the service did (a timeout ends up in ``Outcome.error``); raises when
    the harness itself cannot work (no server answers, the run cannot be created).
    """
    group = [servers] if isinstance(servers, ServerProcess) else list(servers)
    plan = plan or KillPlan()
    started = time.monotonic()
    tid, rid = await _create_run(
        group[0].url,
        input=input,
        assistant_id=assistant_id,
        stream_mode=stream_mode,
        config=config,
        thread_id=thread_id,
    )
    data_dir = group[0].data_dir
    follower = StreamFollower(tid, rid)
    kills: list[KillRecord] = []

    def fires(point: KillPoint, phase_start: float) -> bool:
        if all(c is None for c in (point.counter_lines, point.event, point.after_seconds)):
            return True
        if point.counter_lines is not None and (
            len(counter_lines(data_dir, tid)) >= point.counter_lines
        ):
            return True
        if point.event is not None:
            seen = {e.id: e for e in follower.events}
            if sum(1 for e in seen.values() if point.event(e)) >= point.nth:
                return True
        return point.after_seconds is not None and (
            time.monotonic() - phase_start >= point.after_seconds
        )

    halted = False

    async def wait_for_moment(point: KillPoint, phase_start: float) -> bool:
        """True when the point fires; False when the stream ended (or the harness gave up)."""
        while not (follower.ended or halted):
            if fires(point, phase_start):
                return True
            follower.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(follower.changed.wait(), timeout=0.01)
        return False

    async def killer() -> None:
        phase_start = started
        for point in plan.points:
            if not await wait_for_moment(point, phase_start):
                return
            server = group[point.target]
            kills.append(
                KillRecord(
                    point=point.describe(),
                    at=round(time.monotonic() - started, 3),
                    events_seen=len(follower.events),
                    counter_lines=len(counter_lines(data_dir, tid)),
                    pid=server.pid,
                    server=server.name,
                )
            )
            server.kill()
            if point.restart:
                # Never cancelled half-way: the end of run_with_kills awaits it.
                await asyncio.sleep(point.restart_delay)
                await asyncio.to_thread(server.start)
            phase_start = time.monotonic()

    error: str | None = None
    kill_task = asyncio.create_task(killer(), name="harness-killer")
    follow_task = asyncio.create_task(follower.follow(group, timeout=timeout))
    try:
        # A killer that fails (a restart that does not come up) ends the wait too.
        await asyncio.wait({kill_task, follow_task}, return_when=asyncio.FIRST_EXCEPTION)
        if kill_task.done() and kill_task.exception() is not None:
            follow_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await follow_task
            failure = kill_task.exception()
            assert failure is not None
            raise failure
        await follow_task
    except TimeoutError:
        error = (
            f"no 'end' event within {timeout:.0f} s "
            f"(read {len(follower.events)} events, last id {follower.last_event_id})"
        )
    finally:
        halted = True
        if not kill_task.done():
            await kill_task  # at most the restart in progress
    run = await _get_json(group, f"/threads/{tid}/runs/{rid}")
    thread = await _get_json(group, f"/threads/{tid}")
    return Outcome(
        thread_id=tid,
        run_id=rid,
        status=run.get("status"),
        run=run,
        thread=thread,
        events=follower.events,
        counter=counter_lines(data_dir, tid),
        kills=kills,
        connections=follower.connections,
        elapsed=round(time.monotonic() - started, 3),
        error=error,
    )
