"""The service: the real server in a subprocess, driven over HTTP and SSE like a client would."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, Self

import httpx

from bench.direct import STREAM_MODES
from bench.measure import PgSampler, ProcSampler, RunResult, drive, summarize
from bench.workloads import Workload, make

SCRUBBED_PREFIXES = ("THREADLINE_", "OPENAI_")
"""Dropped from the server's environment: the benchmark sets what it needs, nothing leaks in."""


def clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(SCRUBBED_PREFIXES) and k != "DATABASE_URL"
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Target(Protocol):
    """A running server to drive: :class:`Server`, or ``bench.lgdev.LangGraphDev``."""

    base_url: str
    startup_s: float | None

    @property
    def pid(self) -> int: ...


class ManagedProcess:
    """A server subprocess the benchmark starts (``start``, in the subclass), logging to
    ``log_path``, stopped with SIGTERM (then SIGKILL); a context manager."""

    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    tail_lines = 30

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> None:
        raise NotImplementedError

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=5)

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-self.tail_lines :])

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Server(ManagedProcess):
    """``python -m cli serve`` on a free port; logs to a file; stopped with SIGTERM."""

    def __init__(
        self,
        *,
        url: str,
        data_dir: Path,
        workers: int | None,
        pool_size: int,
        log_path: Path,
        module: str = "cli",
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = {
            **clean_env(),
            "DATABASE_URL": url,
            "THREADLINE_DATA_DIR": str(data_dir),
            **({"THREADLINE_WORKERS": str(workers)} if workers is not None else {}),
            "THREADLINE_POOL_MAX_SIZE": str(pool_size),
            "THREADLINE_LOG_LEVEL": "warning",
            # The floor runs in this process with this environment's sandbox setting: the
            # service gets the same one, so both confine their commands or neither does.
            "THREADLINE_SANDBOX": os.environ.get("THREADLINE_SANDBOX", "auto"),
            **(extra_env or {}),
        }
        self.cmd = [sys.executable, "-m", module, "serve"]
        self.cmd += ["--port", str(self.port)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_s: float | None = None

    def start(self, timeout: float = 60.0) -> None:
        log = self.log_path.open("ab")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the server exited with code {self.proc.returncode} before it was ready:\n"
                    + self.log_tail()
                )
            try:
                if httpx.get(self.base_url + "/ok", timeout=2).status_code == 200:
                    self.startup_s = time.perf_counter() - t0
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the server was not ready within {timeout}s:\n" + self.log_tail())

    def snapshot(self, path: Path, timeout: float = 10.0) -> dict[str, Any]:
        """Ask a server started by ``bench.instrument`` for its counters (SIGUSR2)."""
        path.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the instrumented server did not write its counters")
            time.sleep(0.02)
        return dict(json.loads(path.read_text()))


FORMS = ("threads", "create")
"""How a service run starts: ``threads`` = ``POST /threads``, then ``POST
/threads/{id}/runs/stream`` (two requests, the issue's shape); ``create`` = one request,
``POST /threads/{new id}/runs/stream`` with ``"if_not_exists": "create"``."""


async def one_run(
    client: httpx.AsyncClient,
    n: int,
    delay: float,
    trace: dict[str, Any] | None = None,
    *,
    workload: Workload | None = None,
    form: str = "create",
    expect_end: bool = True,
) -> RunResult:
    """One run read over SSE up to ``end`` (``expect_end``; else to the end of the stream, as
    ``langgraph dev`` sends no ``end`` event). ``form`` says how it starts (see ``FORMS``): with
    ``create`` one request makes the thread and starts the run, as the floor's ``astream`` on a
    new thread id does. Latency and time to first event count from the run's first request.

    ``trace`` follows the run's progress (stage, run id, last event), for saying where a run
    that timed out was stuck."""
    work = workload or make("counter", n, delay)
    trace = {} if trace is None else trace
    body: dict[str, Any] = {
        "assistant_id": work.assistant_id,
        "input": work.input,
        "stream_mode": STREAM_MODES,
    }
    t0 = time.perf_counter()
    if form == "threads":
        trace.update(stage="POST /threads")
        created = await client.post("/threads", json={})
        if created.status_code != 200:
            raise RuntimeError(f"POST /threads: HTTP {created.status_code}: {created.text[:200]}")
        thread_id = str(created.json()["thread_id"])
    else:
        thread_id = str(uuid.uuid4())
        body["if_not_exists"] = "create"
    trace.update(stage="POST /runs/stream (waiting for headers)", thread_id=thread_id)
    # One request does both in the ``create`` form: the run's request is the first one.
    t_run = time.perf_counter() if form == "threads" else t0
    ttfe_meta = ttfe = None
    events = steps = 0
    event: str | None = None
    data: list[str] = []
    status: str | None = None
    error: str | None = None
    verified = False
    latency: float | None = None
    async with client.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as resp:
        if resp.status_code != 200:
            await resp.aread()
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:200]}")
        trace.update(stage="streaming", run_id=resp.headers.get("content-location", "")[-36:])
        async for line in resp.aiter_lines():
            if line == "":
                if event is None and not data:
                    continue
                events += 1
                trace.update(events=events, last_event=event)
                payload = "\n".join(data)
                if event == "end":
                    # Stop the clock here, then read to EOF so the connection can be reused.
                    latency = time.perf_counter() - t0
                    status = json.loads(payload).get("status")
                    event, data = None, []
                    continue
                if event == "error":
                    error = payload[:300]
                elif event == "custom" and '"verify"' in payload:
                    found = json.loads(payload)
                    if found.get("type") == "verify":
                        verified = bool(found.get("passed"))
                elif event == "custom" and '"step"' in payload:
                    found = json.loads(payload)
                    if found.get("type") == "step" and found.get("node") == "agent":
                        steps += 1
                event, data = None, []
                continue
            if line.startswith(":"):
                trace["heartbeats"] = trace.get("heartbeats", 0) + 1
            if latency is not None or line.startswith(":"):
                continue  # heartbeat comment
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                now = time.perf_counter() - t0
                if ttfe_meta is None:
                    ttfe_meta = now
                if ttfe is None and event not in (None, "metadata"):
                    ttfe = now
                data.append(value)
    if latency is None:
        latency = time.perf_counter() - t0
    if status is None and not expect_end and verified:
        status = "success"  # no end event to say so: the graph's verdict and no error
    ok = status == "success" and verified and error is None
    trace["ok"] = ok
    if not ok:
        error = error or (
            f"run ended with status {status!r}" if status else "stream closed without an end event"
        )
        if status == "success" and not verified:
            error = "the task's check did not pass"
    return RunResult(
        ok=ok,
        latency=latency,
        ttfe=ttfe,
        ttfe_meta=ttfe_meta,
        ttfe_run=None if ttfe is None else ttfe - (t_run - t0),
        events=events,
        steps=work.steps_per_run or steps,
        error=None if ok else error,
    )


KEEPALIVE_EXPIRY = 2.0
"""Seconds an idle client connection is reused: below uvicorn's ``timeout_keep_alive`` (5 s).
At the same 5 s (httpx's default) a request can go out on a connection the server is closing
that moment, which ends in a ``ReadError`` under load (seen at c=200)."""


def client_for(base_url: str, concurrency: int, timeout: float) -> httpx.AsyncClient:
    limits = httpx.Limits(
        max_connections=concurrency + 8,
        max_keepalive_connections=concurrency + 8,
        keepalive_expiry=KEEPALIVE_EXPIRY,
    )
    return httpx.AsyncClient(
        base_url=base_url, limits=limits, timeout=httpx.Timeout(timeout, connect=10.0)
    )


async def run_level(
    server: Target,
    *,
    concurrency: int,
    runs: int,
    warmup: int,
    n: int,
    delay: float,
    timeout: float,
    probe: Callable[[], dict[str, Any]] | None = None,
    pg: tuple[str, str] | None = None,
    on_stall: Callable[[], None] | None = None,
    workload: Workload | None = None,
    form: str = "create",
    expect_end: bool = True,
) -> dict[str, Any]:
    """Warm up, then measure ``runs`` runs against a started server, sampling its process.

    ``workload``, ``form`` and ``expect_end`` go to :func:`one_run`; ``server`` is a
    :class:`Server` or anything with its ``base_url``, ``pid`` and ``startup_s`` (``langgraph
    dev``). ``on_stall`` is called once when runs are still out but none has finished for
    ``STALL_SECONDS`` (the CLI asks the server to log its asyncio tasks' stacks)."""
    async with client_for(server.base_url, concurrency, timeout) as client:
        for _ in range(warmup):
            await one_run(client, n, delay, workload=workload, form=form, expect_end=expect_end)
        before = probe() if probe else None
        sampler = ProcSampler(server.pid).start()
        pg_sampler = PgSampler(*pg).start() if pg else None
        me = ProcSampler(os.getpid()).start()
        traces: dict[int, dict[str, Any]] = {}

        def traced(i: int) -> Any:
            traces[i] = {}
            return one_run(
                client, n, delay, traces[i], workload=workload, form=form, expect_end=expect_end
            )

        watchdog = asyncio.create_task(_watch_stalls(traces, runs, on_stall)) if on_stall else None
        results, wall = await drive(
            concurrency, runs, traced, timeout=timeout, describe=lambda i: json.dumps(traces[i])
        )
        if watchdog:
            watchdog.cancel()
        client_usage = me.stop()
        usage = sampler.stop()
        pg_usage = pg_sampler.stop() if pg_sampler else None
        after = probe() if probe else None
    failed = [t for i, t in traces.items() if not t.get("ok")]
    return {
        **summarize(results, wall),
        "stalled": stalled_runs(pg, failed) if pg and failed else None,
        "process": usage,
        "postgres": pg_usage,
        "client": client_usage,
        "probe": {"before": before, "after": after} if probe else None,
        "server_startup_s": round(server.startup_s or 0.0, 3),
        "samples": [r.as_dict() for r in results],
    }


STALL_SECONDS = 45.0


async def _watch_stalls(
    traces: dict[int, dict[str, Any]], runs: int, on_stall: Callable[[], None]
) -> None:
    finished, since = 0, time.monotonic()
    while True:
        await asyncio.sleep(1.0)
        now = sum(1 for t in traces.values() if "ok" in t)
        if now != finished:
            finished, since = now, time.monotonic()
        elif finished and finished < runs and time.monotonic() - since > STALL_SECONDS:
            on_stall()
            return


def stalled_runs(pg: tuple[str, str], traces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the runs that failed were, client side and in the database (at most 20)."""
    import psycopg

    from bench.pg import database_url

    out: list[dict[str, Any]] = []
    try:
        with psycopg.connect(database_url(*pg), autocommit=True) as conn:
            for trace in traces[:20]:
                row = None
                if trace.get("thread_id"):
                    row = conn.execute(
                        "SELECT r.status, r.attempt, r.error,"
                        " (SELECT count(*) FROM run_events e WHERE e.run_id = r.run_id) AS events"
                        " FROM runs r WHERE r.thread_id = %s",
                        (trace["thread_id"],),
                    ).fetchone()
                keys = ("status", "attempt", "error", "events")
                db = dict(zip(keys, row, strict=True)) if row else None
                out.append({**trace, "db": db})
    except Exception as err:  # diagnostics only
        out.append({"error": f"{type(err).__name__}: {err}"})
    return out
