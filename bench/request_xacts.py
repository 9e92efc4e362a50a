"""Transactions per run, from ``pg_stat_database.xact_commit``, for ``bench.request_floor``.

A backend reports its counters when it exits, but while it lives only about once a second and
sometimes many seconds after it went idle, so counts read beside a live pool or server come
short. Each count here is therefore taken around a whole lifetime: a pool opened and closed, a
server started and stopped, with the same lifetime doing no runs subtracted (opening, schema
checks, the server's polling while it is up; a server's lifetimes are padded to the same
length after it is ready).

The same lifetimes count SQL statements and pool checkouts per run (``bench.instrument``: the
server runs as ``python -m bench.instrument serve``, the floor's pool is wrapped in this
process), counted between the start and the end of the work: what a run asks of PostgreSQL,
where a transaction may be several statements, and a pipeline several statements in one round
trip."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench import instrument, pg, request_probes, service
from bench.workloads import make

SETTLE_S = 0.5
"""Pause after a pool or server closed before reading: its backends are exiting."""


def _xacts(admin_url: str, name: str) -> int:
    return pg.stats(admin_url, name, settle=SETTLE_S)["xact_commit"]


async def floor(
    admin_url: str, name: str, url: str, data_dir: Path, pool_size: int, runs: int
) -> dict[str, Any]:
    """The floor's transactions per run: a pool's lifetime with ``runs`` runs, less one without."""
    instrument.install(trace_sql=True)  # this process's pools from now on: after the timing
    start = _xacts(admin_url, name)
    async with request_probes.floor_graph(url, data_dir, pool_size):
        pass
    idle = _xacts(admin_url, name)
    async with request_probes.floor_graph(url, data_dir, pool_size) as (graph, _):
        before = instrument.snapshot()
        for _ in range(runs):
            await request_probes.floor_run(graph)
        sql = per_run(instrument.snapshot(), before, runs)
    end = _xacts(admin_url, name)
    overhead = idle - start
    return {
        "runs": runs,
        "per_run": round((end - idle - overhead) / runs, 2),
        "pool_lifetime": overhead,
        **sql,
    }


def per_run(after: dict[str, Any], before: dict[str, Any], runs: int) -> dict[str, Any]:
    """Statements (by their first words) and pool checkouts per run between two snapshots."""
    stmts = {
        k: round((v - before["statements"].get(k, 0)) / runs, 2)
        for k, v in after["statements"].items()
    }
    stmts = {k: v for k, v in sorted(stmts.items(), key=lambda kv: -kv[1]) if v > 0}
    return {
        "statements_per_run": round(sum(stmts.values()), 2),
        "checkouts_per_run": round((after["checkouts"] - before["checkouts"]) / runs, 2),
        "by_statement": stmts,
    }


Work = Callable[[httpx.AsyncClient], Awaitable[None]]


async def _lifetime(
    make_server: Callable[[Path], service.Server], counters: Path, work: Work, window: float
) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """Start an instrumented server, do ``work``, stay up until ``window`` seconds after it was
    ready, stop it; returns the seconds left over (negative when the work took longer than the
    window) and its counters before and after the work."""
    with make_server(counters) as server:
        ready = time.perf_counter()
        before = server.snapshot(counters)
        async with service.client_for(server.base_url, 1, 60.0) as client:
            await work(client)
        after = server.snapshot(counters)
        left = window - (time.perf_counter() - ready)
        await asyncio.sleep(max(0.0, left))
    return left, before, after


async def service_side(
    make_server: Callable[[Path], service.Server],
    admin_url: str,
    name: str,
    runs: int,
    window: float,
    counters: Path,
) -> dict[str, Any]:
    """The service's transactions per two-request run and per ``POST /threads``: a server's
    lifetime doing ``runs`` of each, less one doing nothing for as long. ``make_server(path)``
    makes a server started by ``bench.instrument`` with its counters written to ``path``."""
    work = make("nowork")

    async def nothing(client: httpx.AsyncClient) -> None:
        return None

    async def two_requests(client: httpx.AsyncClient) -> None:
        for _ in range(runs):
            r = await service.one_run(client, 0, 0.0, workload=work, form="threads")
            if not r.ok:
                raise RuntimeError(f"a service run failed: {r.error}")

    async def threads(client: httpx.AsyncClient) -> None:
        for _ in range(runs):
            await request_probes.post_thread(client)

    counts: dict[str, int] = {}
    left: dict[str, float] = {}
    sql: dict[str, dict[str, Any]] = {}
    before = _xacts(admin_url, name)
    for key, job in (("idle", nothing), ("two_requests", two_requests), ("threads", threads)):
        spare, start, end = await _lifetime(make_server, counters, job, window)
        left[key] = round(spare, 2)
        sql[key] = per_run(end, start, runs)
        after = _xacts(admin_url, name)
        counts[key], before = after - before, after
    run = (counts["two_requests"] - counts["idle"]) / runs
    per_thread = (counts["threads"] - counts["idle"]) / runs
    return {
        "runs": runs,
        "window_s": round(window, 2),
        "seconds_left_in_window": left,
        "lifetimes": counts,
        "per_run": round(run, 2),
        "post_threads": round(per_thread, 2),
        "run_request": round(run - per_thread, 2),
        **sql["two_requests"],
        "post_threads_sql": {k: v for k, v in sql["threads"].items() if k != "by_statement"},
    }
