"""``python -m eval``: run a suite against a threadline service and report what the agent achieves.

By default the runner starts its own server (``tests.utils.server.ServerProcess``) on a new database
``eval_<uuid>`` (created on the admin URL ``--database-url``, dropped at the end) and a temporary
data directory, with the offline model unless ``--openai-base-url``/``--openai-model`` are given.
``--url`` drives an existing server instead. ``--crash`` SIGKILLs the server ``--kills`` times at
random moments while the suite runs (the suite is repeated until every kill has happened).

Writes ``eval/results/<timestamp>.json`` and renders ``eval/REPORT.md`` with plots in
``eval/plots/``; ``--from-results`` re-renders the report from saved results. Exit status: 0, or
1 when a durability promise broke (duplicate effects, lost events, runs that never ended) or the
pass rate is below ``--min-pass-rate``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langgraph_sdk import get_client
from psycopg.conninfo import conninfo_to_dict

from eval import metrics, model_info, report
from eval.crash import Killer, records_json
from eval.database import admin_url, create_database, drop_database
from eval.episode import Driver, retry
from eval.runner_options import parse_args, server_env
from eval.suite import Case, Suite, load_suite
from tests.utils.processes import kill_strays
from tests.utils.server import ServerProcess, api_headers

MAX_ROUNDS = 100
"""Crash mode repeats the suite until the kills are done, at most this many times."""


class Schedule:
    """Hands out (case, rep) in rounds; in crash mode adds rounds until the kills are done."""

    def __init__(self, cases: Sequence[Case], reps: int, killer: Killer | None) -> None:
        self.cases, self.killer = list(cases), killer
        self.items = [(c, r) for r in range(reps) for c in self.cases]
        self.rounds = reps
        self.index = 0

    def next(self) -> tuple[Case, int] | None:
        killing = self.killer is not None and not self.killer.done.is_set()
        if self.index >= len(self.items) and killing and self.rounds < MAX_ROUNDS:
            self.items += [(c, self.rounds) for c in self.cases]
            self.rounds += 1
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]


async def run_suite(
    opts: argparse.Namespace,
    suite: Suite,
    base_url: str,
    server: ServerProcess | None,
) -> dict[str, Any]:
    """Play the suite against ``base_url``; kill ``server`` meanwhile in crash mode."""
    origin = time.monotonic()

    def clock() -> float:
        return time.monotonic() - origin

    client = get_client(url=base_url, headers=api_headers())
    try:
        info = await retry(lambda: client.http.get("/info"))
        driver = Driver(
            client, [server] if server else [base_url], base_url, clock, opts.decision, opts.timeout
        )
        killer = (
            Killer(server, opts.kills, clock, seed=opts.seed, max_uptime=opts.max_uptime)
            if opts.crash and server is not None
            else None
        )
        schedule = Schedule(suite.cases, opts.reps, killer)
        episodes: list[dict[str, Any]] = []

        async def work() -> None:
            while (item := schedule.next()) is not None:
                episode = await driver.play(*item)
                episodes.append(episode)
                if not opts.quiet:
                    print(progress(episode, len(episodes)), file=sys.stderr, flush=True)

        await _run_workers([work() for _ in range(opts.concurrency)], killer)
    finally:
        await client.aclose()
    kills = records_json(killer.records) if killer else []
    episodes.sort(key=lambda e: e["started_at"])
    return {
        "info": info,
        "episodes": episodes,
        "kills": kills,
        "elapsed_seconds": round(clock(), 2),
    }


async def _run_workers(workers: list[Any], killer: Killer | None) -> None:
    """Run the workers (and the killer); a killer that fails (no restart) stops everything."""
    stop = asyncio.Event()
    all_work = asyncio.ensure_future(asyncio.gather(*workers))
    if killer is None:
        await all_work
        return
    killing = asyncio.create_task(killer.run(stop))
    try:
        await asyncio.wait({all_work, killing}, return_when=asyncio.FIRST_COMPLETED)
        if killing.done() and killing.exception() is not None:
            all_work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await all_work
            raise RuntimeError("crash mode: the server did not come back") from killing.exception()
        await all_work
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await killing


def progress(e: dict[str, Any], done: int) -> str:
    state = "PASS" if e["passed"] else "FAIL"
    extra = f", error {e['error']}" if e["error"] else ""
    return (
        f"[{done:4d}] {state} {e['task']:<17} rep {e['rep']}: {e['status']} in "
        f"{e['wall_seconds']:.2f} s, {e['approvals']} approval(s){extra}"
    )


async def evaluate(opts: argparse.Namespace) -> dict[str, Any]:
    """Run the evaluation the options describe; returns the result (not yet saved)."""
    suite = load_suite(opts.suite)
    started = dt.datetime.now(dt.UTC)
    load_before = _load()
    if opts.url:
        raw = await run_suite(opts, suite, opts.url.rstrip("/"), None)
    else:
        admin = admin_url(opts.database_url)
        database = create_database(admin)
        data_dir = Path(tempfile.mkdtemp(prefix="threadline-eval-"))
        server = ServerProcess(database, data_dir, env=server_env(opts), name="eval")
        try:
            await asyncio.to_thread(server.start)
            raw = await run_suite(opts, suite, server.url, server)
        finally:
            server.stop()
            kill_strays(data_dir)
            drop_database(admin, database)
            shutil.rmtree(data_dir, ignore_errors=True)
        raw["own_server"] = {
            "database": conninfo_to_dict(database).get("dbname"),
            "data_dir": str(data_dir),
            "pids": sorted(
                {k["pid"] for k in raw["kills"] if k["pid"]}
                | ({server.process.pid} if server.process else set())
            ),
        }
    return build_result(opts, suite, started, {**raw, "load_before": load_before})


def build_result(
    opts: argparse.Namespace, suite: Suite, started: dt.datetime, raw: dict[str, Any]
) -> dict[str, Any]:
    episodes = raw["episodes"]
    info = raw["info"]
    label = opts.label or suite.name + (
        "-crash" if opts.crash and "crash" not in suite.name else ""
    )
    result = {
        "version": 1,
        "label": re.sub(r"[^A-Za-z0-9_.-]+", "-", label),
        "started_at": started.strftime("%Y-%m-%d %H:%M:%SZ"),
        "elapsed_seconds": raw["elapsed_seconds"],
        "suite": suite.describe(),
        "options": {
            "reps": opts.reps,
            "concurrency": opts.concurrency,
            "decision": opts.decision,
            "crash": opts.crash,
            "kills": opts.kills if opts.crash else 0,
            "max_uptime": opts.max_uptime,
            "seed": opts.seed,
            "timeout": opts.timeout,
        },
        "model": model_info.describe(None if opts.url else server_env(opts), info),
        "server": {
            "own": not opts.url,
            **raw.get("own_server", {}),
            "url": opts.url,
            "model": info.get("model"),
            "version": info.get("version"),
            "langgraph": info.get("langgraph"),
        },
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": [raw.get("load_before"), _load()],
        },
        "kills": raw["kills"],
        "episodes": episodes,
    }
    return with_metrics(result)


def with_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with its metrics (re)computed from its episodes and kills."""
    episodes, kills = result["episodes"], result["kills"]
    head = {k: v for k, v in result.items() if k not in ("kills", "episodes")}
    return {
        **head,
        "metrics": metrics.summarize(episodes),
        "durability": metrics.durability(episodes, kills),
        "recovery": metrics.recovery(episodes, kills) if result["options"]["crash"] else None,
        "kills": kills,
        "episodes": episodes,
    }


def _load() -> float | None:
    """The 1-minute load average (None where the OS has none): other work skews timings."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def save(result: dict[str, Any], results_dir: Path) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = results_dir / f"{stamp}.json"
    n = 2
    while path.exists():
        path = results_dir / f"{stamp}-{n}.json"
        n += 1
    path.write_text(json.dumps(result, indent=1))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m eval`` (and ``threadline eval``); returns the exit status."""
    opts = parse_args(argv)
    if opts.from_results:
        results = [with_metrics(json.loads(p.read_text())) for p in opts.from_results]
        print(report.render(results, opts.report, opts.plots_dir))
        return 0
    result = asyncio.run(evaluate(opts))
    path = save(result, opts.results_dir)
    print(f"result: {path}")
    if not opts.no_report:
        print(f"report: {report.render([result], opts.report, opts.plots_dir)}")
    print(report.headline(result))
    broken = metrics.problems(result)
    for problem in broken:
        print(f"problem: {problem}", file=sys.stderr)
    rate = result["metrics"]["overall"]["pass_at_1"] or 0.0
    if opts.min_pass_rate is not None and rate < opts.min_pass_rate:
        print(f"pass@1 {rate} is below --min-pass-rate {opts.min_pass_rate}", file=sys.stderr)
        return 1
    return 1 if broken else 0
