"""Soak: concurrent ``counter`` runs against one or two servers, SIGKILLed at random moments.

    python -m eval.soak --kills 100 --concurrency 4 --servers 2

On a fresh database (``soak_<uuid>`` created on the ``--database-url`` admin URL, dropped at the
end) and a temporary data directory, it keeps ``--concurrency`` counter runs in flight (random
``n`` and ``delay``), each followed by a client that reads the whole stream and reconnects with
``Last-Event-ID`` to whichever server is up. At random intervals (``--kill-every MIN MAX``
seconds) it SIGKILLs a server that holds a running run (the tools it started live on, as after a
real ``kill -9``) and restarts it at once in the background; a server is killed only after it
has been up for a random MIN..MAX seconds itself, so a restart (a few seconds on a busy machine)
does not end in a kill before the server did anything. Once ``--kills`` kills happened it starts
no new run, waits for the runs in flight to end, and reports:

- runs started / finished / ended verified, and every run that broke the contract;
- duplicated and missing ``counter.txt`` lines (target 0);
- events lost or duplicated per run, as the reconnecting client saw them against what the
  server stored (target 0);
- the distribution of attempts per run, appends re-run and skipped by the idempotency ledger;
- time from a kill to resumed progress: the first event of an interrupted run, newer than what it
  had stored at the kill, reaching the client (median, p90, max).

The JSON report goes to ``eval/results/soak-<timestamp>.json``; a markdown summary is printed.
The exit code is 1 when any run broke the contract. The servers run with the default settings,
attempts limit included: a run ends in error only after ``THREADLINE_MAX_ATTEMPTS`` attempts in
a row that saved nothing, and a kill is held back while a server holds a run whose previous
attempt already saved nothing and whose current one has not saved anything yet
(:func:`eval.kill_targets.stalling_again`), so a run is never stalled twice in a row by the soak.

The soak's parts: :mod:`eval.soak_loop` (runs in flight, the killer), :mod:`eval.soak_checks`
(one run checked), :mod:`eval.soak_report` (the summary and its markdown),
:mod:`eval.soak_records` (options, runs and kills as kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from eval.database import create_database, drop_database
from eval.soak_loop import Soak
from eval.soak_records import SoakOptions
from eval.soak_report import build_report, markdown
from tests.utils.processes import kill_strays


async def soak(options: SoakOptions) -> dict[str, Any]:
    """Run the soak; returns the report (also written to ``options.results_dir``)."""
    url = create_database(options.database_url, prefix="soak_")
    data_dir = Path(tempfile.mkdtemp(prefix="threadline-soak-"))
    runner = Soak(options, url, data_dir)
    try:
        await runner.run()
        report = build_report(runner)
    finally:
        runner.stop_servers()
        kill_strays(data_dir)
        if not options.keep:
            with contextlib.suppress(Exception):
                drop_database(options.database_url, url, prefix="soak_")
            shutil.rmtree(data_dir, ignore_errors=True)
    # The name, read as psycopg reads it (the embedded server's URL ends in ?host=/a/path).
    report["database"] = conninfo_to_dict(url)["dbname"]
    report["data_dir"] = str(data_dir)
    report["markdown"] = markdown(report)
    if options.results_dir is not None:
        options.results_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = options.results_dir / f"soak-{stamp}.json"
        path.write_text(json.dumps(report, indent=2, default=str))
        report["path"] = str(path)
    return report


def parse_args(argv: list[str] | None = None) -> SoakOptions:
    d = SoakOptions()
    p = argparse.ArgumentParser(prog="python -m eval.soak", description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=d.kills, help="SIGKILLs to deliver (%(default)s)")
    p.add_argument("--concurrency", type=int, default=d.concurrency, help="runs in flight")
    p.add_argument("--servers", type=int, default=d.servers, choices=(1, 2, 3))
    p.add_argument("--database-url", default=d.database_url, help="PostgreSQL admin URL")
    p.add_argument("--n", nargs=2, type=int, default=(d.n_min, d.n_max), metavar=("MIN", "MAX"))
    p.add_argument(
        "--delay", nargs=2, type=float, default=(d.delay_min, d.delay_max), metavar=("MIN", "MAX")
    )
    p.add_argument(
        "--kill-every",
        nargs=2,
        type=float,
        default=(d.kill_min, d.kill_max),
        metavar=("MIN", "MAX"),
        help="seconds between kills (uniform)",
    )
    p.add_argument("--lease", type=float, default=d.lease_seconds)
    p.add_argument("--heartbeat", type=float, default=d.heartbeat_seconds)
    p.add_argument("--seed", type=int)
    p.add_argument("--drain-timeout", type=float, default=d.drain_timeout)
    p.add_argument("--results-dir", type=Path, default=d.results_dir)
    p.add_argument("--keep", action="store_true", help="keep the database and data directory")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    return SoakOptions(
        kills=a.kills,
        concurrency=a.concurrency,
        servers=a.servers,
        database_url=a.database_url,
        n_min=a.n[0],
        n_max=a.n[1],
        delay_min=a.delay[0],
        delay_max=a.delay[1],
        kill_min=a.kill_every[0],
        kill_max=a.kill_every[1],
        lease_seconds=a.lease,
        heartbeat_seconds=a.heartbeat,
        seed=a.seed,
        drain_timeout=a.drain_timeout,
        results_dir=a.results_dir,
        keep=a.keep,
        verbose=not a.quiet,
    )


def main(argv: list[str] | None = None) -> None:
    options = parse_args(argv)
    report = asyncio.run(soak(options))
    print(report["markdown"])
    if "path" in report:
        print(f"\nreport: {report['path']}")
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
