"""One concurrency level of one graph: the floor, the service (both ways of starting a run) and,
for the no-work graph, ``langgraph dev``, back to back."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench import direct, pg, report, service
from bench.lgdev import LangGraphDev
from bench.workloads import Workload

SERVICE_MODES = {"service": "threads", "service_create": "create"}
"""Result key -> how the run starts (``bench.service.FORMS``)."""
MODES = ("direct", *SERVICE_MODES, "langgraph_dev")
LABELS = {
    "direct": "floor",
    "service": "threadline (POST /threads + stream)",
    "service_create": "threadline (one request, if_not_exists)",
    "langgraph_dev": "langgraph dev (in memory)",
}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Context:
    """What every level of a benchmark invocation shares."""

    runner: asyncio.Runner
    args: argparse.Namespace
    warmup: int
    workers: int | None
    urls: dict[str, str]
    names: dict[str, str]
    tmp: Path
    server_log: Path
    config: Path
    """The ``langgraph.json`` serving the no-work graph (threadline and ``langgraph dev``)."""
    lgdev: Path | None
    """The ``langgraph`` executable, when installed."""
    settle_s: float = 1.5
    """Pause before reading ``pg_stat_database`` around a phase on a running server: a busy
    backend reports its counters about once a second."""
    reuse: bool = False
    """One threadline server and one ``langgraph dev`` for every level and graph (``--quick``:
    starting servers is most of a smoke run), instead of a fresh process per level."""
    stack: ExitStack = field(default_factory=ExitStack)
    shared: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        """Stop the servers kept for reuse."""
        self.stack.close()


S = TypeVar("S", service.Server, LangGraphDev)


def _started(
    ctx: Context, key: str, make: Callable[[], S]
) -> tuple[S, AbstractContextManager[Any]]:
    """A server to use and the scope to use it in: a fresh one that the scope starts and stops,
    or with ``ctx.reuse`` the one kept under ``key`` (started on first use, stopped by
    ``ctx.close()``)."""
    if not ctx.reuse:
        server = make()
        return server, server
    if key not in ctx.shared:
        ctx.shared[key] = ctx.stack.enter_context(make())
    return ctx.shared[key], nullcontext()


def runs_for(concurrency: int, args: argparse.Namespace) -> int:
    """Runs per level: enough for stable medians at low levels (at c=1 on this machine, 20 runs
    after 2 warm-ups once gave a latency ratio of 1.57, where four runs of 40-50 gave 1.10-1.20);
    at high ones ``c`` (every lane runs once, so all ``c`` are in flight together), which keeps
    c=200 within the time budget."""
    if args.runs_per_level:
        return int(args.runs_per_level)
    if args.quick:
        return 5 if concurrency == 1 else max(10, concurrency)
    return max(50, concurrency)


def timeout_for(concurrency: int, args: argparse.Namespace) -> float:
    """A run's time limit: at high levels a run shares the machine with ``c - 1`` others."""
    return float(max(args.timeout, 2.5 * concurrency))


def level(ctx: Context, work: Workload, c: int) -> dict[str, Any]:
    """One concurrency level: the floor, then each service mode, back to back."""
    args = ctx.args
    runs = runs_for(c, args)
    common = {
        "concurrency": c,
        "runs": runs,
        "warmup": ctx.warmup,
        "n": args.n,
        "delay": args.delay,
        "timeout": timeout_for(c, args),
        "workload": work,
    }
    out: dict[str, Any] = {
        "graph": work.name,
        "concurrency": c,
        "loadavg_1m_start": round(os.getloadavg()[0], 2),
    }

    before = pg.stats(args.pg_url, ctx.names["direct"], settle=0)
    out["direct"] = ctx.runner.run(
        direct.run_level(
            url=ctx.urls["direct"],
            data_dir=ctx.tmp / f"direct-{work.name}-{c}",
            pool_size=args.pool_size,
            pg=(args.pg_url, ctx.names["direct"]),
            floor_saver=args.floor_saver,
            **common,
        )
    )
    _xacts(out["direct"], pg.diff(pg.stats(args.pg_url, ctx.names["direct"]), before), runs, ctx)

    out.update(_service(ctx, work, c, common, runs))
    if work.name == "nowork" and ctx.lgdev is not None:
        out["langgraph_dev"] = _langgraph_dev(ctx, c, common)

    out["ratios_by_mode"] = {
        mode: report.ratios(out, mode) for mode in MODES[1:] if out.get(mode, {}).get("runs")
    }
    out["ratios"] = out["ratios_by_mode"]["service"]
    d = out["direct"]
    parts = [f"direct {d['runs_per_s']} runs/s p50 {d['latency_p50_ms']} ms err {d['errors']}"]
    for mode in MODES[1:]:
        if mode in out and out[mode].get("runs"):
            r, q = out[mode], out["ratios_by_mode"][mode]
            parts.append(
                f"{mode} {r['runs_per_s']} runs/s p50 {r['latency_p50_ms']} ms err "
                f"{r['errors']} (x{q['throughput']} throughput, x{q['latency_p50']} p50)"
            )
    say(f"  {work.name} c={c:<3} runs={runs:<4} " + " | ".join(parts))
    return out


def _xacts(r: dict[str, Any], xacts: dict[str, int], runs: int, ctx: Context) -> None:
    r["db"] = xacts
    r["db_xacts_per_run"] = round(xacts["xact_commit"] / (runs + ctx.warmup), 1)


def _service(
    ctx: Context, work: Workload, c: int, common: dict[str, Any], runs: int
) -> dict[str, dict[str, Any]]:
    """A fresh server (serving the built-in agent and the no-work graph) measured with each way of
    starting runs in turn (``SERVICE_MODES``), each after its own warm-up; its database's
    transactions over each phase (read after a pause, so its backends have reported them; the
    server's idle polling in between is counted too)."""
    args = ctx.args
    server, scope = _started(
        ctx,
        "threadline",
        lambda: service.Server(
            url=ctx.urls["service"],
            data_dir=ctx.tmp / ("service" if ctx.reuse else f"service-{work.name}-{c}"),
            workers=ctx.workers,
            pool_size=args.pool_size,
            log_path=ctx.server_log,
            extra_env={"THREADLINE_CONFIG": str(ctx.config)},
        ),
    )
    stalls: list[float] = []

    def on_stall() -> None:
        # The app logs every asyncio task's stack on SIGUSR1: where the stuck runs wait.
        say(f"  c={c}: runs stopped finishing; the server logs its stacks to {ctx.server_log}")
        stalls.append(time.time())
        os.kill(server.pid, signal.SIGUSR1)

    out: dict[str, dict[str, Any]] = {}
    with scope:
        for mode, form in SERVICE_MODES.items():
            stalls.clear()
            before = pg.stats(args.pg_url, ctx.names["service"], settle=ctx.settle_s)
            r: dict[str, Any] = ctx.runner.run(
                service.run_level(
                    server,
                    pg=(args.pg_url, ctx.names["service"]),
                    on_stall=on_stall,
                    form=form,
                    **common,
                )
            )
            after = pg.stats(args.pg_url, ctx.names["service"], settle=ctx.settle_s)
            r["form"] = form
            r["stall_dumped_at"] = stalls[0] if stalls else None
            _xacts(r, pg.diff(after, before), runs, ctx)
            out[mode] = r
    return out


def _langgraph_dev(ctx: Context, c: int, common: dict[str, Any]) -> dict[str, Any]:
    """``langgraph dev`` on the same graph, runs started like the service's ``threads`` mode; a
    fresh process per level, as the service gets (unless ``ctx.reuse``). A server that does not
    start is reported."""
    exe = ctx.lgdev
    assert exe is not None
    if "langgraph_dev_error" in ctx.shared:
        return {"runs": 0, "start_error": ctx.shared["langgraph_dev_error"]}
    log = ctx.server_log.with_name(ctx.server_log.name.replace("-server", "-langgraph-dev"))
    try:
        dev, scope = _started(
            ctx,
            "langgraph_dev",
            lambda: LangGraphDev(exe, ctx.config, jobs=ctx.workers, log_path=log),
        )
        with scope:
            r: dict[str, Any] = ctx.runner.run(
                service.run_level(dev, form="threads", expect_end=False, **common)
            )
    except RuntimeError as err:
        say(f"  langgraph dev failed to start: {err}")
        if ctx.reuse:
            ctx.shared["langgraph_dev_error"] = str(err)[-1500:]
        return {"runs": 0, "start_error": str(err)[-1500:]}
    r["form"] = "threads"
    r["log"] = str(log)
    return r
