"""``python -m bench``: direct (the floor) vs the service, level by level, then the report."""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from api.platform.settings import Settings
from bench import direct, longthread, pg, report, request_floor, service, throughput, workloads
from bench.lgdev import find as find_langgraph
from bench.lgdev import version_of
from bench.throughput import runs_for

DEFAULT_WORKERS = f"threadline {Settings.model_fields['workers'].default}, langgraph dev its own"
"""What each server executes at once unless ``--workers`` says."""

POOL_DEFAULT = int(Settings.model_fields["pool_max_size"].default)
"""The server's own pool size: the benchmark measures what a server started with its defaults
does (the floor's pool gets the same size)."""

RESULTS = Path(__file__).parent / "results"


SECTIONS = ("throughput", "eventlog", "checkpoints", "resume", "longthread", "requestfloor")


def _levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--concurrency takes 1,10,50, not {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("--concurrency levels must be positive integers")
    return levels


def _sections(text: str) -> list[str]:
    chosen = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in SECTIONS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"--only takes some of {','.join(SECTIONS)}, not {text!r}")
    return chosen


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--quick", action="store_true", help="smoke run: c=1,10, few runs, short sections"
    )
    p.add_argument(
        "--only",
        type=_sections,
        default=list(SECTIONS),
        help=f"sections to run, some of {','.join(SECTIONS)} (default: all)",
    )
    p.add_argument("--concurrency", type=_levels, help="levels, default 1,10,50,200")
    p.add_argument(
        "--runs-per-level",
        type=int,
        help="measured runs per level and mode (default: 50 at c<=50, c above)",
    )
    p.add_argument(
        "--graph",
        choices=(*workloads.GRAPHS, "both"),
        default="both",
        help="throughput: the built-in agent's counter task, the no-work graph (bench/nowork.py), "
        "or both (default)",
    )
    p.add_argument(
        "--floor-saver",
        choices=direct.FLOOR_SAVERS,
        default="pooled",
        help="the floor's checkpointer: the service's PooledSaver (default) or LangGraph's stock "
        "AsyncPostgresSaver (one lock for all calls)",
    )
    p.add_argument(
        "--langgraph-dev",
        default=os.environ.get("BENCH_LANGGRAPH_DEV", "auto"),
        help="the langgraph executable to compare with on the no-work graph: auto (beside this "
        "Python, else on PATH), off, or a path (env BENCH_LANGGRAPH_DEV)",
    )
    p.add_argument("--n", type=int, default=5, help="counter task: lines to append (default 5)")
    p.add_argument("--delay", type=float, default=0.0, help="counter task: seconds per append")
    p.add_argument("--warmup", type=int, help="unmeasured runs before each phase (default 5)")
    p.add_argument(
        "--pool-size",
        type=int,
        default=POOL_DEFAULT,
        help=f"connections per pool (default {POOL_DEFAULT}, the server's own default)",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="runs each server executes at once: THREADLINE_WORKERS, langgraph dev's "
        "--n-jobs-per-worker (default: each server's own default)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds one run may take, at least; raised to 2.5 s per concurrent run above",
    )
    p.add_argument(
        "--ckpt-steps", type=int, default=100, help="checkpoints: agent steps of the thread"
    )
    p.add_argument(
        "--ckpt-files",
        type=int,
        default=20,
        help="checkpoints: also measure with this many files in the workspace (0: skip)",
    )
    p.add_argument("--resume-repeats", type=int, help="resume: kill/restart cycles (default 5)")
    p.add_argument(
        "--longthread-runs",
        type=int,
        help="longthread: runs on one thread (default 400; 60 with --quick)",
    )
    p.add_argument(
        "--longthread-graph",
        choices=(*longthread.GRAPHS, "both"),
        default="both",
        help="longthread: the chat graph (bench/chat.py), the built-in agent (a counter task a "
        "run), or both (default)",
    )
    p.add_argument(
        "--requestfloor-runs",
        type=int,
        default=None,
        help="requestfloor: rounds of what one HTTP request costs (default 200; 30 with --quick)",
    )
    p.add_argument(
        "--longthread-delta",
        action="store_true",
        help="longthread: also the chat graph whose messages are a DeltaChannel",
    )
    p.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_PG_URL", pg.DEFAULT_ADMIN_URL),
        help="a PostgreSQL URL allowed to create databases (env BENCH_PG_URL)",
    )
    p.add_argument(
        "--loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="event loop of the benchmark process (auto: uvloop, as uvicorn picks)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="afterwards, sample server and floor with py-spy at the highest level",
    )
    p.add_argument(
        "--trace-sql",
        action="store_true",
        help="afterwards, count the SQL statements per run of server and floor (c=1)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    return p


def loop_factory(choice: str) -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    if choice in ("auto", "uvloop"):
        try:
            import uvloop

            return uvloop.new_event_loop, "uvloop"
        except ImportError:
            if choice == "uvloop":
                sys.exit("bench: uvloop is not installed")
    return None, "asyncio"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def scrub_environment() -> None:
    """The floor's ``Settings`` must not pick up a developer's THREADLINE_* / OPENAI_* variables."""
    for key in list(os.environ):
        if key.startswith(service.SCRUBBED_PREFIXES) or key == "DATABASE_URL":
            del os.environ[key]


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    levels = args.concurrency or ([1, 10] if args.quick else [1, 10, 50, 200])
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 5)
    workers = args.workers
    sections = args.only
    scrub_environment()
    factory, loop_name = loop_factory(args.loop)

    head = pg.connection_headroom(args.pg_url)
    free = head["max_connections"] - head["in_use"]
    # One pool (the floor's or the server's) is open at a time, plus the server's listener.
    if args.pool_size + 4 > free:
        say(
            f"bench: warning: PostgreSQL has {free} free connections; pool size "
            f"{args.pool_size} may not fit"
        )

    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    names = {"direct": pg.new_name("bench"), "service": pg.new_name("bench")}
    urls: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix="threadline-bench-"))
    args.out.mkdir(parents=True, exist_ok=True)
    prefix = stamp.replace(":", "").replace("-", "")
    server_log = args.out / f"{prefix}-server.log"
    meta: dict[str, Any] = {
        "timestamp": stamp,
        "quick": args.quick,
        "sections": sections,
        "n": args.n,
        "delay": args.delay,
        "levels": levels,
        "warmup": warmup,
        "pool_size": args.pool_size,
        "floor_saver": args.floor_saver,
        "workers": workers if workers is not None else f"server defaults ({DEFAULT_WORKERS})",
        "loop": loop_name,
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "langgraph": version("langgraph"),
        "langgraph_checkpoint_postgres": version("langgraph-checkpoint-postgres"),
        "postgres": head["server_version"],
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "server_log": str(server_log),
    }
    result: dict[str, Any] = {"meta": meta, "levels": []}
    started = time.perf_counter()
    timings: dict[str, float] = {}
    say(f"bench: sections {', '.join(sections)}; results in {args.out}")
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            if "eventlog" in sections:
                t0 = time.perf_counter()
                result["eventlog"] = event_log(runner, args)
                timings["eventlog"] = time.perf_counter() - t0
            if "checkpoints" in sections:
                t0 = time.perf_counter()
                result["checkpoints"] = checkpoint_storage(runner, args, tmp)
                timings["checkpoints"] = time.perf_counter() - t0
            if "throughput" in sections:
                t0 = time.perf_counter()
                graphs = list(workloads.GRAPHS) if args.graph == "both" else [args.graph]
                meta["graphs"] = graphs
                lgdev: Path | None = None
                if "nowork" in graphs:
                    lgdev, meta["langgraph_dev"] = find_langgraph(args.langgraph_dev)
                    if lgdev is not None:
                        meta["langgraph_dev_versions"] = version_of(lgdev)
                say(
                    f"bench: graphs {', '.join(graphs)}; levels {levels}, counter n={args.n}, "
                    f"pool {args.pool_size}, workers {workers}, loop {loop_name}, floor saver "
                    f"{args.floor_saver}; langgraph dev: {meta.get('langgraph_dev', '-')}; "
                    f"databases {', '.join(names.values())}"
                )
                for mode, name in names.items():
                    urls[mode] = pg.create_database(args.pg_url, name)
                ctx = throughput.Context(
                    runner=runner,
                    args=args,
                    warmup=warmup,
                    workers=workers,
                    urls=urls,
                    names=names,
                    tmp=tmp,
                    server_log=server_log,
                    config=workloads.write_config(tmp / "graphs"),
                    lgdev=lgdev,
                    settle_s=0.3 if args.quick else 1.5,
                    reuse=args.quick,
                )
                try:
                    for graph in graphs:
                        work = workloads.make(graph, args.n, args.delay)
                        key = "levels" if graph == "counter" else f"levels_{graph}"
                        result[key] = [throughput.level(ctx, work, c) for c in levels]
                        step_key = "per_step" if graph == "counter" else f"per_step_{graph}"
                        result[step_key] = report.per_step(result[key])
                finally:
                    ctx.close()
                timings["throughput"] = time.perf_counter() - t0
            if "resume" in sections:
                t0 = time.perf_counter()
                result["resume"] = resume_latency(runner, args, tmp, prefix)
                timings["resume"] = time.perf_counter() - t0
            if "longthread" in sections:
                t0 = time.perf_counter()
                runs = args.longthread_runs or (60 if args.quick else 400)
                chosen = longthread.chosen(args.longthread_graph, args.longthread_delta)
                say(f"bench: a long thread, {runs} runs on one thread: {', '.join(chosen)}")
                result["longthread"] = longthread.measure(
                    runner, args.pg_url, runs, tmp, chosen, say=say
                )
                timings["longthread"] = time.perf_counter() - t0
            if "requestfloor" in sections:
                t0 = time.perf_counter()
                rounds = args.requestfloor_runs or (30 if args.quick else 200)
                say(f"bench: what one HTTP request costs, {rounds} rounds (bench/request_floor.py)")
                options = ["--runs", str(rounds), "--pg-url", args.pg_url]
                result["requestfloor"] = request_floor.measure(
                    request_floor.parser().parse_args(options)
                )
                timings["requestfloor"] = time.perf_counter() - t0
            if args.profile and urls:
                result["profile"] = profile(
                    runner, args, urls, tmp, server_log, workers, max(levels), warmup
                )
            if args.trace_sql and urls:
                result["sql"] = trace_sql(runner, args, urls, tmp, server_log, workers, warmup)
    finally:
        for name in names.values():
            if name in " ".join(urls.values()):
                try:
                    pg.drop_database(args.pg_url, name)
                except Exception as err:
                    say(f"bench: could not drop database {name}: {err}")
        shutil.rmtree(tmp, ignore_errors=True)
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    meta["duration_s"] = round(time.perf_counter() - started, 1)
    meta["section_s"] = {k: round(v, 1) for k, v in timings.items()}
    paths = report.write(result, args.out)
    print(paths["md"].read_text())
    say(f"bench: {meta['duration_s']} s; wrote {', '.join(str(p) for p in paths.values())}")


def event_log(runner: asyncio.Runner, args: argparse.Namespace) -> dict[str, Any]:
    """``events.append`` vs a plain insert, on a database of its own."""
    from bench import eventlog

    say("bench: event-log write cost")
    name = pg.new_name("bench_events")
    url = pg.create_database(args.pg_url, name)
    try:
        out = runner.run(
            eventlog.run(
                url, events_per_round=30 if args.quick else 60, rounds=5 if args.quick else 11
            )
        )
    finally:
        pg.drop_database(args.pg_url, name)
    us = out["us_per_event"]
    say("  us/event: " + ", ".join(f"{k} {v}" for k, v in us.items()))
    return out


def checkpoint_storage(
    runner: asyncio.Runner, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    """A long thread's checkpoint bytes: the agent as it is, DeltaChannel, pruning."""
    from bench import checkpoints

    steps = min(args.ckpt_steps, 50) if args.quick else args.ckpt_steps
    say(f"bench: checkpoint storage over {steps} agent steps")
    out = {"empty": runner.run(checkpoints.run(args.pg_url, tmp, steps=steps, say=say))}
    if args.ckpt_files and not args.quick:
        say(f"bench: checkpoint storage with {args.ckpt_files} files in the workspace")
        out["files"] = runner.run(
            checkpoints.run(args.pg_url, tmp, steps=steps, files=args.ckpt_files, say=say)
        )
        out["files"]["files"] = args.ckpt_files
    return out


def resume_latency(
    runner: asyncio.Runner, args: argparse.Namespace, tmp: Path, prefix: str
) -> dict[str, Any]:
    """kill -9 mid-run, restart: how long until the run goes on, and until it ends."""
    from bench import resume

    repeats = args.resume_repeats or (2 if args.quick else 5)
    out: dict[str, Any] = {}
    # The agent's messages are a DeltaChannel now, so the service as it is covers that case.
    for variant, module, times in (("service", "cli", repeats),):
        if not times:
            continue
        say(f"bench: resume after kill -9 ({variant}), {times} times")
        name = pg.new_name("bench_resume")
        url = pg.create_database(args.pg_url, name)
        try:
            found = runner.run(
                resume.run(
                    url,
                    tmp / f"resume-{variant}",
                    args.out / f"{prefix}-resume-{variant}.log",
                    repeats=times,
                    module=module,
                )
            )
        finally:
            pg.drop_database(args.pg_url, name)
        out[variant] = found
        say(
            f"  restart->/ok {found['restart_to_ok_s']['median']} s, kill->resumed "
            f"{found['kill_to_resumed_s']['median']} s, kill->end "
            f"{found['kill_to_end_s']['median']} s (median); all ok: {found['all_ok']}"
        )
    return out


def _instrumented_server(
    args: argparse.Namespace,
    urls: dict[str, str],
    data_dir: Path,
    server_log: Path,
    workers: int | None,
    out: Path,
    *,
    trace_sql: bool,
) -> service.Server:
    return service.Server(
        url=urls["service"],
        data_dir=data_dir,
        workers=workers,
        pool_size=args.pool_size,
        log_path=server_log,
        module="bench.instrument",
        extra_env={"BENCH_INSTRUMENT_OUT": str(out), "BENCH_TRACE_SQL": "1" if trace_sql else "0"},
    )


def _pool(level: dict[str, Any]) -> dict[str, Any]:
    from bench import instrument

    return instrument.pool_diff(level["probe"]["after"], level["probe"]["before"])


def profile(
    runner: asyncio.Runner,
    args: argparse.Namespace,
    urls: dict[str, str],
    tmp: Path,
    server_log: Path,
    workers: int | None,
    c: int,
    warmup: int,
) -> dict[str, Any]:
    """py-spy and pool statistics: the server, then this process running the floor (not timed)."""
    from bench import instrument, profiling

    runs = runs_for(c, args)
    stamp = server_log.name.removesuffix("-server.log")
    common = {
        "concurrency": c,
        "runs": runs,
        "warmup": 0,
        "n": args.n,
        "delay": args.delay,
        "timeout": args.timeout,
    }
    warm = {**common, "runs": max(warmup, 1), "concurrency": 1}
    out: dict[str, Any] = {"concurrency": c, "runs": runs}
    say(f"bench: profiling at c={c} with py-spy")

    counters = tmp / "instrument-profile.json"
    server = _instrumented_server(
        args, urls, tmp / "profile-service", server_log, workers, counters, trace_sql=False
    )
    with server:
        runner.run(service.run_level(server, **warm))
        rec = profiling.Recorder(server.pid, args.out / f"{stamp}-profile-service.txt")
        level = runner.run(
            service.run_level(server, **common, probe=lambda: server.snapshot(counters))
        )
        out["service"] = profiling.summarize(rec.stop())
        out["service"]["pool"] = _pool(level)
        out["service"]["run"] = {
            k: level[k]
            for k in (
                "runs_per_s",
                "latency_p50_ms",
                "ttfe_meta_p50_ms",
                "ttfe_p50_ms",
                "ttfe_run_p50_ms",
            )
        }

    instrument.install(trace_sql=False)
    runner.run(
        direct.run_level(
            url=urls["direct"], data_dir=tmp / "profile-direct", pool_size=args.pool_size, **warm
        )
    )
    rec = profiling.Recorder(os.getpid(), args.out / f"{stamp}-profile-direct.txt")

    def probe() -> dict[str, Any]:
        snap = instrument.snapshot()
        instrument.WAITING["max"] = 0
        return snap

    level = runner.run(
        direct.run_level(
            url=urls["direct"],
            data_dir=tmp / "profile-direct",
            pool_size=args.pool_size,
            **common,
            probe=probe,
        )
    )
    out["direct"] = profiling.summarize(rec.stop())
    out["direct"]["pool"] = _pool(level)
    out["direct"]["run"] = {k: level[k] for k in ("runs_per_s", "latency_p50_ms", "ttfe_p50_ms")}
    for who in ("service", "direct"):
        if out[who].get("samples"):
            out[who]["per_run"] = round(out[who]["samples"] / runs, 1)
    return out


def _per_run(after: dict[str, Any], before: dict[str, Any], runs: int) -> dict[str, Any]:
    stmts = {
        k: round((v - before["statements"].get(k, 0)) / runs, 2)
        for k, v in after["statements"].items()
    }
    stmts = {k: v for k, v in sorted(stmts.items(), key=lambda kv: -kv[1]) if v > 0}
    return {
        "statements_per_run": round(sum(stmts.values()), 1),
        "checkouts_per_run": round((after["checkouts"] - before["checkouts"]) / runs, 1),
        "by_statement": stmts,
    }


def trace_sql(
    runner: asyncio.Runner,
    args: argparse.Namespace,
    urls: dict[str, str],
    tmp: Path,
    server_log: Path,
    workers: int | None,
    warmup: int,
) -> dict[str, Any]:
    """Statements and pool checkouts per run, one run at a time (idle polling included)."""
    from bench import instrument

    runs = 10
    common = {
        "concurrency": 1,
        "runs": runs,
        "warmup": 0,
        "n": args.n,
        "delay": args.delay,
        "timeout": args.timeout,
    }
    warm = {**common, "runs": max(warmup, 1)}
    say(f"bench: counting SQL statements over {runs} runs (c=1)")
    counters = tmp / "instrument-sql.json"
    server = _instrumented_server(
        args, urls, tmp / "trace-service", server_log, workers, counters, trace_sql=True
    )
    with server:
        runner.run(service.run_level(server, **warm))
        level = runner.run(
            service.run_level(server, **common, probe=lambda: server.snapshot(counters))
        )
    out: dict[str, Any] = {
        "runs": runs,
        "service": _per_run(level["probe"]["after"], level["probe"]["before"], runs),
    }
    instrument.install(trace_sql=True)
    runner.run(
        direct.run_level(
            url=urls["direct"], data_dir=tmp / "trace-direct", pool_size=args.pool_size, **warm
        )
    )
    level = runner.run(
        direct.run_level(
            url=urls["direct"],
            data_dir=tmp / "trace-direct",
            pool_size=args.pool_size,
            **common,
            probe=instrument.snapshot,
        )
    )
    out["direct"] = _per_run(level["probe"]["after"], level["probe"]["before"], runs)
    return out
