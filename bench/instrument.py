"""Looking inside a process without touching threadline's code: SQL counts and pool statistics.

``install(trace_sql=...)`` wraps the ``open`` and ``getconn`` of threadline's pool class
(:class:`api.platform.pool.RecentFirstPool`, every pool the service and the floor open): to find
the pools (their queueing statistics, and ``requests_waiting`` sampled every 50 ms from a
thread), and, when ``trace_sql``, to count checkouts and give each connection handed out a
cursor class that counts statements (psycopg's ``cursor_factory``, what ``execute`` and
``executemany`` run on). psycopg's own classes are left as they are.

``python -m bench.instrument serve ...`` runs ``threadline`` that way (``$BENCH_TRACE_SQL=1``
adds statement counts) and writes :func:`snapshot` to ``$BENCH_INSTRUMENT_OUT`` on SIGUSR2 and
at exit. Statements sent in one pipeline (the checkpointer's writes) count one each though they
share a round trip.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from psycopg import AsyncCursor

from api.platform.pool import RecentFirstPool

COUNTS: Counter[str] = Counter()
CHECKOUTS: Counter[str] = Counter()
POOLS: list[Any] = []
WAITING = {"max": 0, "sum": 0, "samples": 0}
INSTALLED: set[str] = set()
"""What :func:`install` wrapped already (``pools``, ``sql``): it wraps each once."""


def label(query: Any) -> str:
    """A statement's first words, whitespace collapsed (``(empty)`` for the pool's check)."""
    if isinstance(query, bytes):
        text = query.decode(errors="replace")
    elif isinstance(query, str):
        text = query
    else:  # psycopg.sql.Composed and friends
        text = repr(query)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:90] if text else "(empty: pool connection check)"


class TracedCursor(AsyncCursor[Any]):
    """A cursor that counts the statements it runs, by :func:`label`."""

    async def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        COUNTS[label(query)] += 1
        return await super().execute(query, *args, **kwargs)

    async def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> None:
        params_seq = list(params_seq)
        COUNTS[f"[executemany x{len(params_seq)}] " + label(query)] += 1
        await super().executemany(query, params_seq, **kwargs)


def _sample_pools() -> None:
    while True:
        waiting = 0
        for pool in list(POOLS):
            with contextlib.suppress(Exception):
                waiting += pool.get_stats().get("requests_waiting", 0)
        WAITING["max"] = max(WAITING["max"], waiting)
        WAITING["sum"] += waiting
        WAITING["samples"] += 1
        threading.Event().wait(0.05)


def install(*, trace_sql: bool) -> None:
    if "pools" not in INSTALLED:
        INSTALLED.add("pools")
        open_ = RecentFirstPool.open

        async def tracked_open(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self not in POOLS:
                POOLS.append(self)
            return await open_(self, *args, **kwargs)

        RecentFirstPool.open = tracked_open  # type: ignore[method-assign]
        threading.Thread(target=_sample_pools, name="bench-pool-sampler", daemon=True).start()
    if not trace_sql or "sql" in INSTALLED:
        return
    INSTALLED.add("sql")
    getconn = RecentFirstPool.getconn

    async def traced_getconn(self: Any, *args: Any, **kwargs: Any) -> Any:
        CHECKOUTS["pool checkouts"] += 1
        conn = await getconn(self, *args, **kwargs)
        conn.cursor_factory = TracedCursor
        return conn

    RecentFirstPool.getconn = traced_getconn  # type: ignore[method-assign]


def pool_stats() -> dict[str, int]:
    """Counters summed over the process's open pools (``psycopg_pool`` ``get_stats``)."""
    total: Counter[str] = Counter()
    for pool in list(POOLS):
        if pool.closed:
            POOLS.remove(pool)
            continue
        for k, v in pool.get_stats().items():
            total[k] += v
    return dict(total)


def snapshot() -> dict[str, Any]:
    return {
        "statements": dict(COUNTS),
        "checkouts": CHECKOUTS["pool checkouts"],
        "pool": pool_stats(),
        "waiting": dict(WAITING),
    }


def pool_diff(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """Pool queueing between two snapshots: checkouts, how many waited and how long."""
    a, b = after["pool"], before["pool"]

    def d(key: str) -> int:
        return int(a.get(key, 0)) - int(b.get(key, 0))

    requests, queued, wait_ms = d("requests_num"), d("requests_queued"), d("requests_wait_ms")
    samples = after["waiting"]["samples"] - before["waiting"]["samples"]
    waiting_sum = after["waiting"]["sum"] - before["waiting"]["sum"]
    return {
        "checkouts": requests,
        "queued_pct": round(100 * queued / requests, 1) if requests else None,
        "wait_ms_per_checkout": round(wait_ms / requests, 2) if requests else None,
        "wait_ms_per_queued": round(wait_ms / queued, 1) if queued else None,
        "usage_ms_per_checkout": round(d("usage_ms") / requests, 2) if requests else None,
        "mean_waiting": round(waiting_sum / samples, 1) if samples else None,
        "max_waiting": after["waiting"]["max"],
        "pool_size_end": a.get("pool_size"),
        "pool_max": a.get("pool_max"),
    }


def _dump() -> None:
    out = os.environ.get("BENCH_INSTRUMENT_OUT")
    if out:
        with open(out + ".tmp", "w") as f:
            json.dump(snapshot(), f, indent=1)
        WAITING["max"] = 0  # the next snapshot reports the peak since this one
        os.replace(out + ".tmp", out)


if __name__ == "__main__":
    import signal

    install(trace_sql=os.environ.get("BENCH_TRACE_SQL") == "1")
    atexit.register(_dump)
    # SIGUSR2: the app itself takes SIGUSR1 (it logs every asyncio task's stack).
    signal.signal(signal.SIGUSR2, lambda *_: _dump())
    from cli.main import main

    main(sys.argv[1:])
