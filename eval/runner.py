"""``python -m eval``: run a suite against a threadline service and report what the agent achieves.

By default the runner starts its own server (``eval.harness.ServerProcess``) on a new database
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
from eval.harness import ServerProcess, api_headers, kill_strays
from eval.suite import Case, Suite, available, load_suite

EVAL_DIR = Path(__file__).parent
MAX_ROUNDS = 100
"""Crash mode repeats the suite until the kills are done, at most this many times."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m eval", description="Evaluate the agent on a task suite over HTTP."
    )
    p.add_argument("--suite", default="small", help=f"{' | '.join(available())} or a JSON file")
    p.add_argument("--reps", type=int, default=3, help="repetitions per task (default 3)")
    p.add_argument("--concurrency", type=int, default=4, help="episodes at once (default 4)")
    p.add_argument(
        "--decision",
        choices=["approve", "reject"],
        default="approve",
        help="how the runner answers approval requests (default approve)",
    )
    p.add_argument("--url", help="drive this running server instead of starting one")
    p.add_argument(
        "--database-url",
        help="admin URL to create the evaluation database on (default "
        "$THREADLINE_TEST_DATABASE_URL or postgresql://postgres@127.0.0.1:5432/postgres)",
    )
    p.add_argument("--openai-base-url", help="OpenAI-compatible endpoint for the started server")
    p.add_argument("--openai-model", help="model name for the started server")
    p.add_argument("--openai-timeout", type=float, help="OPENAI_TIMEOUT of the started server")
    p.add_argument(
        "--openai-max-retries", type=int, help="OPENAI_MAX_RETRIES of the started server"
    )
    p.add_argument("--openai-max-tokens", type=int, help="OPENAI_MAX_TOKENS of the started server")
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another setting for the started server (repeatable): THREADLINE_MAX_STEPS=10, ...",
    )
    p.add_argument("--crash", action="store_true", help="SIGKILL the server while the suite runs")
    p.add_argument("--kills", type=int, default=10, help="kills in crash mode (default 10)")
    p.add_argument("--max-uptime", type=float, default=3.0, help="longest uptime before a kill (s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per episode")
    p.add_argument("--label", help="name of this result in the report (default from the suite)")
    p.add_argument("--results-dir", type=Path, default=EVAL_DIR / "results")
    p.add_argument("--report", type=Path, default=EVAL_DIR / "REPORT.md")
    p.add_argument("--plots-dir", type=Path, default=EVAL_DIR / "plots")
    p.add_argument("--no-report", action="store_true", help="write the JSON result only")
    p.add_argument(
        "--from-results", nargs="+", type=Path, help="render the report from these results only"
    )
    p.add_argument("--min-pass-rate", type=float, help="exit 1 when overall pass@1 is lower")
    p.add_argument("--quiet", action="store_true", help="no line per finished episode")
    opts = p.parse_args(argv)
    if opts.crash and opts.url:
        p.error("--crash needs a server the runner owns: drop --url")
    if opts.reps < 1 or opts.concurrency < 1 or opts.kills < 0:
        p.error("--reps and --concurrency must be at least 1, --kills at least 0")
    if opts.url and (opts.server_env or opts.openai_base_url or opts.openai_model):
        p.error("--server-env and --openai-* configure a server the runner starts: drop --url")
    if any("=" not in item for item in opts.server_env):
        p.error("--server-env takes NAME=VALUE")
    return opts


def server_env(opts: argparse.Namespace) -> dict[str, str]:
    """The environment the runner gives the server it starts: ``--server-env``, then the model's
    (``model_env``)."""
    extra = dict(item.split("=", 1) for item in opts.server_env)
    return {**extra, **model_env(opts)}


def model_env(opts: argparse.Namespace) -> dict[str, str]:
    """``OPENAI_*`` for the server the runner starts (none: the offline model). Any
    OpenAI-compatible endpoint (``--openai-base-url``) and model name (``--openai-model``)."""
    if not (opts.openai_base_url or opts.openai_model):
        return {}
    key = os.environ.get("OPENAI_API_KEY")
    if not key and not opts.openai_base_url:
        raise SystemExit("--openai-model without --openai-base-url needs OPENAI_API_KEY")
    env = {"OPENAI_API_KEY": key or "not-needed"}  # local servers (vLLM, Ollama) ignore it
    if opts.openai_base_url:
        env["OPENAI_BASE_URL"] = opts.openai_base_url
    if opts.openai_model:
        env["OPENAI_MODEL"] = opts.openai_model
    if opts.openai_timeout is not None:
        env["OPENAI_TIMEOUT"] = str(opts.openai_timeout)
    if opts.openai_max_retries is not None:
        env["OPENAI_MAX_RETRIES"] = str(opts.openai_max_retries)
    if opts.openai_max_tokens is not None:
        env["OPENAI_MAX_TOKENS"] = str(opts.openai_max_tokens)
    return env


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
