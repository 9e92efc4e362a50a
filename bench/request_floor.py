"""What a separate HTTP request costs here: the floor, the service's two-request form and its
parts, and the costs underneath them (an HTTP round trip, an SSE stream of a run's size, one
durable PostgreSQL write), measured in one invocation on one machine.

``python -m bench.request_floor [--runs N] [--out FILE]``. Every item runs once per round, in
an order shuffled each round, so the items meet the machine's load alike; medians and p90 over
``N`` rounds (after a few warm-up rounds), each also divided by the floor's. Items:

- ``floor``: one run of the no-work graph in this process on LangGraph's stock
  ``AsyncPostgresSaver`` (``durability="sync"``, ``updates`` + ``custom``);
- ``service_two_requests``: ``POST /threads`` + ``POST /threads/{id}/runs/stream`` read to
  ``end`` (``bench.service.one_run``, keep-alive httpx client), on ``threadline serve``;
- ``post_threads`` and ``run_request``: the same two requests timed alone (the run on a thread
  made just before, untimed); ``split`` gives the same split of the two-request samples;
- ``service_ok``: ``GET /ok`` (the whole middleware stack, and one ``SELECT 1`` on the pool);
- ``bare_get`` / ``bare_sse``: ``bench.bare_app`` (Starlette under uvicorn as the service runs
  it): ``GET /ok`` answering ``{}``, and ``POST /sse`` replaying a real run's stream (its 21
  events) through sse-starlette, read to ``end``;
- ``pg_insert`` / ``pg_select``: an autocommit ``INSERT`` (one durable write) / ``SELECT 1`` on
  a pooled connection (``api.platform.database.open_pool``).

Around each item (outside its clock) the CPU of this process, of the server that answered and
of the PostgreSQL backends it used (``bench.request_cpu``: means per item). After the rounds,
transactions, SQL statements and pool checkouts per run on each side (``bench.request_xacts``),
and the ``account``: service two-request - floor = 2 HTTP round trips (2 x ``bare_get``) + SSE
(``bare_sse`` - ``bare_get``) + extra transactions x ``pg_insert`` + remainder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from bench import pg, request_probes, request_xacts, service
from bench.bare_app import EVENTS_ENV
from bench.measure import percentile
from bench.request_cpu import CpuMeter, summary
from bench.request_rounds import ITEMS, LABELS, Harness
from bench.workloads import write_config

__all__ = ["ITEMS", "LABELS", "analyse", "main", "markdown", "measure"]

WARMUP = 5
POOL_SIZE = 20
"""The server's default pool, and the floor's, as ``python -m bench`` gives both."""


def stat(values: list[float]) -> dict[str, Any]:
    def ms(q: float) -> float:
        return round((percentile(values, q) or 0.0) * 1000, 3)

    return {"n": len(values), "p50_ms": ms(50), "p90_ms": ms(90), "min_ms": ms(0)}


async def _timed(args: argparse.Namespace, tmp: Path, names: dict[str, str]) -> dict[str, Any]:
    urls = {k: pg.database_url(args.pg_url, v) for k, v in names.items()}
    config = write_config(tmp / "graphs")

    def make_server(counters: Path | None = None) -> service.Server:
        """``threadline serve`` on the no-work graph; with ``counters``, started by
        ``bench.instrument`` counting SQL statements into that file (not timed)."""
        traced = {"BENCH_INSTRUMENT_OUT": str(counters), "BENCH_TRACE_SQL": "1"}
        return service.Server(
            url=urls["service"],
            data_dir=tmp / "service-data",
            workers=None,
            pool_size=POOL_SIZE,
            log_path=tmp / "server.log",
            module="cli" if counters is None else "bench.instrument",
            extra_env={"THREADLINE_CONFIG": str(config), **(traced if counters else {})},
        )

    rng = random.Random(args.seed)
    async with AsyncExitStack() as stack:
        server = stack.enter_context(make_server())
        graph, pool = await stack.enter_async_context(
            request_probes.floor_graph(urls["floor"], tmp / "floor-data", POOL_SIZE)
        )
        svc = await stack.enter_async_context(service.client_for(server.base_url, 1, 60.0))
        # A real run's stream, for the bare app to replay.
        events: list[dict[str, str]] = []
        _, thread_id = await request_probes.post_thread(svc)
        await request_probes.run_request(svc, thread_id, events)
        (tmp / "events.json").write_text(json.dumps(events))
        bare_server = service.Server(
            url=urls["service"],
            data_dir=tmp / "bare-data",
            workers=None,
            pool_size=POOL_SIZE,
            log_path=tmp / "bare.log",
            module="bench.bare_app",
            extra_env={EVENTS_ENV: str(tmp / "events.json")},
        )
        stack.enter_context(bare_server)
        bare = await stack.enter_async_context(service.client_for(bare_server.base_url, 1, 60.0))
        meter = CpuMeter(
            args.pg_url, {"service": server.pid, "bare": bare_server.pid}, names.copy()
        )
        h = Harness(graph, pool, svc, bare, len(events), meter)
        await h.rounds(args.warmup, record=False, rng=rng)
        t0 = time.perf_counter()
        await h.rounds(args.runs, record=True, rng=rng)
        wall = time.perf_counter() - t0
    xact_runs = min(args.runs, 50)
    two_p90 = percentile(h.samples["service_two_requests"], 90) or 0.1
    xacts = {
        "floor": await request_xacts.floor(
            args.pg_url, names["floor"], urls["floor"], tmp / "floor-data", POOL_SIZE, xact_runs
        ),
        "service": await request_xacts.service_side(
            make_server,
            args.pg_url,
            names["service"],
            xact_runs,
            1.0 + 2 * xact_runs * two_p90,
            tmp / "counters.json",
        ),
    }
    return {
        "rounds_wall_s": round(wall, 2),
        "stream_events": len(events),
        "samples": h.samples,
        "cpu": {k: summary(v) for k, v in h.cpu.items()},
        "cpu_unreadable": meter.errors,
        "split_samples": h.split,
        "xacts": xacts,
    }


def analyse(raw: dict[str, Any]) -> dict[str, Any]:
    """Items (ms, p50/p90, x the floor's), the split of the two-request form, the account."""
    items = {
        k: {"label": LABELS[k], **stat(v), "cpu_ms": raw["cpu"][k]}
        for k, v in raw["samples"].items()
    }
    floor = items["floor"]
    for r in items.values():
        r["x_floor_p50"] = round(r["p50_ms"] / floor["p50_ms"], 3)
        r["x_floor_p90"] = round(r["p90_ms"] / floor["p90_ms"], 3)
    split = {k: stat(v) for k, v in raw["split_samples"].items()}
    fx, sx = raw["xacts"]["floor"], raw["xacts"]["service"]
    extra = round(sx["per_run"] - fx["per_run"], 2)
    p50 = {k: r["p50_ms"] for k, r in items.items()}
    gap = p50["service_two_requests"] - p50["floor"]
    parts = {
        "http_round_trips_ms": 2 * p50["bare_get"],
        "sse_ms": p50["bare_sse"] - p50["bare_get"],
        "extra_transactions_ms": extra * p50["pg_insert"],
    }
    parts["remainder_ms"] = gap - sum(parts.values())
    account: dict[str, Any] = {"gap_ms": round(gap, 3)}
    for k, v in parts.items():
        account[k] = round(v, 3)
        account[k.replace("_ms", "_share")] = round(v / gap, 3) if gap else None
    account["extra_transactions"] = extra
    # CPU per run, mean ms (10 ms ticks averaged): where the service's extra time is spent.
    fc, sc = items["floor"]["cpu_ms"], items["service_two_requests"]["cpu_ms"]
    account["cpu_extra_ms"] = {k: round(sc[k] - fc[k], 3) for k in sc}
    # What /ok costs beyond a bare round trip and its own SELECT 1: the middleware stack.
    account["service_stack_per_request_ms"] = round(
        p50["service_ok"] - p50["bare_get"] - p50["pg_select"], 3
    )
    return {"items": items, "split_of_two_requests": split, "account": account}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    names = {"floor": pg.new_name("bench_rf"), "service": pg.new_name("bench_rf")}
    started = time.time()
    try:
        for name in names.values():
            pg.create_database(args.pg_url, name)
        with tempfile.TemporaryDirectory(prefix="bench-request-floor-") as tmp:
            raw = asyncio.run(_timed(args, Path(tmp), names))
    finally:
        for name in names.values():
            pg.drop_database(args.pg_url, name)
    settings = pg_settings(args.pg_url)
    meta = {
        "started_at": started,
        "seconds": round(time.time() - started, 1),
        "runs": args.runs,
        "warmup": args.warmup,
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
        "postgres": settings,
        "rounds_wall_s": raw["rounds_wall_s"],
        "stream_events": raw["stream_events"],
        "cpu_unreadable": raw["cpu_unreadable"],
    }
    return {"meta": meta, **analyse(raw), "xacts": raw["xacts"], "samples": raw["samples"]}


def pg_settings(admin_url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN"
            " ('synchronous_commit', 'fsync', 'wal_sync_method', 'server_version')"
        ).fetchall()
    return {name: value for name, value in rows}


def markdown(results: dict[str, Any]) -> str:
    m, a = results["meta"], results["account"]
    out = [
        f"## What a separate HTTP request costs (c=1, no-work graph, {m['runs']} rounds)",
        "",
        f"Load average {' '.join(m['loadavg_before'])} before, "
        f"{' '.join(m['loadavg_after'])} after; {m['cpus']} CPUs; PostgreSQL "
        f"{m['postgres'].get('server_version', '?')}, synchronous_commit "
        f"{m['postgres'].get('synchronous_commit', '?')}.",
        "",
        "| item | p50 ms | p90 ms | p50 x floor | p90 x floor | CPU ms: client / server / PG |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results["items"].values():
        c = r["cpu_ms"]
        out.append(
            f"| {r['label']} | {r['p50_ms']:.2f} | {r['p90_ms']:.2f} | "
            f"{r['x_floor_p50']:.2f} | {r['x_floor_p90']:.2f} | "
            f"{c['client']:.1f} / {c['server']:.1f} / {c['pg']:.1f} |"
        )
    s = results["split_of_two_requests"]
    fx, sx = results["xacts"]["floor"], results["xacts"]["service"]
    out += [
        "",
        f"Split of the two-request samples (p50): POST /threads {s['post_threads']['p50_ms']:.2f}"
        f" ms, the run's request {s['run_request']['p50_ms']:.2f} ms. Transactions per run: "
        f"floor {fx['per_run']}, service {sx['per_run']} (POST /threads {sx['post_threads']}, "
        f"the run's request {sx['run_request']}); SQL statements per run: floor "
        f"{fx['statements_per_run']}, service {sx['statements_per_run']}; pool checkouts per "
        f"run: floor {fx['checkouts_per_run']}, service {sx['checkouts_per_run']}; "
        f"{fx['runs']} runs each.",
        "",
        "| account of service (2 requests) - floor, p50 | ms | share of the gap |",
        "|---|---:|---:|",
        f"| **gap** | **{a['gap_ms']:.2f}** | 1.00 |",
        f"| 2 HTTP round trips (2 x bare GET) | {a['http_round_trips_ms']:.2f} "
        f"| {a['http_round_trips_share']} |",
        f"| SSE of the run's events (bare SSE - bare GET) | {a['sse_ms']:.2f} | {a['sse_share']} |",
        f"| {a['extra_transactions']} extra transactions x INSERT | "
        f"{a['extra_transactions_ms']:.2f} | {a['extra_transactions_share']} |",
        f"| remainder | {a['remainder_ms']:.2f} | {a['remainder_share']} |",
        "",
        "The middleware stack per request (GET /ok - bare GET - SELECT 1): "
        f"{a['service_stack_per_request_ms']:.2f} ms. CPU per run, service (2 requests) - floor "
        f"(means): client {a['cpu_extra_ms']['client']:+.1f}, server "
        f"{a['cpu_extra_ms']['server']:+.1f}, PostgreSQL {a['cpu_extra_ms']['pg']:+.1f}, all "
        f"{a['cpu_extra_ms']['all']:+.1f} ms (the floor's graph runs in the client process; "
        "CPU is read in 10 ms ticks, so single items are coarse).",
    ]
    return "\n".join(out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.request_floor", description=__doc__)
    p.add_argument("--runs", type=int, default=200, help="measured rounds (default 200)")
    p.add_argument("--warmup", type=int, default=WARMUP, help="unmeasured rounds first")
    p.add_argument("--out", type=Path, help="write the results (JSON) here")
    p.add_argument("--seed", type=int, default=0, help="of the rounds' shuffled order")
    p.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_PG_URL", pg.DEFAULT_ADMIN_URL),
        help="a PostgreSQL admin URL that may create databases",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    results = measure(args)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    print(markdown(results))
    print(f"({results['meta']['seconds']} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
