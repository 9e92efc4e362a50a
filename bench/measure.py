"""Driving runs at a fixed concurrency, per-run results, summaries, process sampling."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import psutil


@dataclass
class RunResult:
    """One run as the caller saw it; times in seconds from the run's first request."""

    ok: bool
    latency: float
    ttfe: float | None = None
    """First graph chunk (direct) / first event after ``metadata`` (service)."""
    ttfe_meta: float | None = None
    """Service only: the first event at all (``metadata``)."""
    ttfe_run: float | None = None
    """``ttfe`` counted from the request that starts the run instead (after ``POST /threads``
    when the thread is made first; the same as ``ttfe`` otherwise)."""
    events: int = 0
    steps: int = 0
    """Agent steps the run took (``custom`` events ``{"type": "step", "node": "agent"}``)."""
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def drive(
    concurrency: int,
    total: int,
    run_one: Callable[[int], Awaitable[RunResult]],
    *,
    timeout: float,
    describe: Callable[[int], str] | None = None,
) -> tuple[list[RunResult], float]:
    """``total`` runs, ``concurrency`` at a time (a closed loop); returns results and wall time.

    ``describe(i)`` adds what is known of run ``i`` to its error when it fails."""
    todo = iter(range(total))
    results: list[RunResult] = []

    async def one(i: int) -> RunResult:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                return await run_one(i)
        except Exception as err:  # a failed run is a data point, not a crash
            where = f" [{describe(i)}]" if describe else ""
            return RunResult(
                ok=False,
                latency=time.perf_counter() - started,
                error=f"{type(err).__name__}: {err}"[:300] + where[:500],
            )

    async def lane() -> None:
        for i in todo:  # one shared iterator: each lane takes the next run when it is free
            results.append(await one(i))

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(max(1, min(concurrency, total)))))
    return results, time.perf_counter() - started


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in 0..100), ``None`` for no values."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(results: list[RunResult], wall: float) -> dict[str, Any]:
    """Per-level numbers; latencies over successful runs only, times in milliseconds."""
    good = [r for r in results if r.ok]

    def ms(values: list[float | None], q: float) -> float | None:
        v = percentile([x for x in values if x is not None], q)
        return None if v is None else round(v * 1000, 2)

    errors = [r.error or "failed" for r in results if not r.ok]
    return {
        "runs": len(results),
        "errors": len(errors),
        "error_samples": sorted(set(errors))[:5],
        "wall_s": round(wall, 3),
        "runs_per_s": round(len(good) / wall, 3) if wall > 0 else None,
        "latency_p50_ms": ms([r.latency for r in good], 50),
        "latency_p95_ms": ms([r.latency for r in good], 95),
        "latency_max_ms": ms([r.latency for r in good], 100),
        "ttfe_p50_ms": ms([r.ttfe for r in good], 50),
        "ttfe_p95_ms": ms([r.ttfe for r in good], 95),
        "ttfe_meta_p50_ms": ms([r.ttfe_meta for r in good], 50),
        "ttfe_run_p50_ms": ms([r.ttfe_run if r.ttfe_run is not None else r.ttfe for r in good], 50),
        "events_per_run": (round(sum(r.events for r in good) / len(good), 1) if good else None),
        "steps_per_run": (round(sum(r.steps for r in good) / len(good), 2) if good else None),
    }


class ProcSampler:
    """CPU time and peak RSS of one process over an interval, sampled from a thread.

    CPU is ``psutil`` user+system of the process, and separately of its exited children (the
    tool subprocesses each run starts), as deltas between :meth:`start` and :meth:`stop`.
    """

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._t0: float | None = None
        self._cpu0: Any = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_rss = max(self.peak_rss, self.proc.memory_info().rss)
            except psutil.Error:
                return
            self._stop.wait(self.interval)

    def start(self) -> ProcSampler:
        self._cpu0 = self.proc.cpu_times()
        self._t0 = time.perf_counter()
        self.peak_rss = self.proc.memory_info().rss
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        cpu1 = self.proc.cpu_times()
        cpu0 = self._cpu0
        assert cpu0 is not None and self._t0 is not None
        own = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        children = (cpu1.children_user - cpu0.children_user) + (
            cpu1.children_system - cpu0.children_system
        )
        elapsed = time.perf_counter() - self._t0
        return {
            "cpu_s": round(own, 3),
            "children_cpu_s": round(children, 3),
            "elapsed_s": round(elapsed, 3),
            "cpu_util": round(own / elapsed, 3) if elapsed else None,
            "peak_rss_mb": round(self.peak_rss / 2**20, 1),
        }


class PgSampler:
    """CPU time of the PostgreSQL backends serving one database, over an interval.

    Every ``interval`` seconds it lists the database's backends (``pg_stat_activity``) and reads
    their CPU time (``psutil``; needs permission to read the server's processes). A backend's
    CPU is counted from when it was first seen (from 0 if it started during the interval); the
    last fraction of a second of a backend that exits before the end is missed.
    """

    def __init__(self, admin_url: str, dbname: str, interval: float = 0.5) -> None:
        self.admin_url, self.dbname, self.interval = admin_url, dbname, interval
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.procs: dict[int, psutil.Process] = {}
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-pg-sampler", daemon=True)

    def _sample(self, conn: Any, initial: bool) -> None:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.dbname,)
        ).fetchall()
        for (pid,) in rows:
            try:
                proc = self.procs.get(pid) or psutil.Process(pid)
                self.procs[pid] = proc
                t = proc.cpu_times()
                cpu = t.user + t.system
            except psutil.Error:
                continue
            if pid not in self.first:
                self.first[pid] = cpu if initial else 0.0
            self.last[pid] = cpu

    def _loop(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                self._sample(conn, initial=True)
                self._ready.set()
                while not self._stop.wait(self.interval):
                    self._sample(conn, initial=False)
                self._sample(conn, initial=False)
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self._ready.set()

    def start(self) -> PgSampler:
        self._ready = threading.Event()
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        cpu = sum(self.last[pid] - self.first[pid] for pid in self.last)
        return {"cpu_s": round(cpu, 3), "backends": len(self.last), "error": self.error}
