"""The ``/metrics`` registry of one app: the process's instruments (``api.platform.metrics``), the
pool's statistics and the runs' counts, read when scraped."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.platform.database import Pool
from api.platform.metrics import PROCESS_METRICS, RUN_STATUSES
from api.store import run_stats

POOL_GAUGES = {
    "pool_size": ("threadline_pool_size", "Connections the pool holds (in use or idle)"),
    "pool_min": ("threadline_pool_min_size", "The pool's minimum size"),
    "pool_max": ("threadline_pool_max_size", "The pool's maximum size"),
    "pool_available": ("threadline_pool_connections_idle", "Idle connections in the pool"),
    "requests_waiting": (
        "threadline_pool_requests_waiting",
        "Requests waiting for a connection right now",
    ),
}
POOL_COUNTERS = {
    "requests_num": ("threadline_pool_requests", "Connection requests", 1),
    "requests_queued": (
        "threadline_pool_requests_queued",
        "Connection requests that had to wait",
        1,
    ),
    "requests_wait_ms": (
        "threadline_pool_requests_wait_seconds",
        "Time spent waiting for a connection",
        1000,
    ),
    "requests_errors": (
        "threadline_pool_requests_errors",
        "Connection requests that failed (timeout, pool closed)",
        1,
    ),
    "usage_ms": ("threadline_pool_usage_seconds", "Time connections were out of the pool", 1000),
    "returns_bad": (
        "threadline_pool_returns_bad",
        "Connections returned to the pool in a bad state",
        1,
    ),
    "connections_num": ("threadline_pool_connections_opened", "Connections opened", 1),
    "connections_errors": (
        "threadline_pool_connections_errors",
        "Failed attempts to open a connection",
        1,
    ),
    "connections_lost": (
        "threadline_pool_connections_lost",
        "Connections found broken and discarded",
        1,
    ),
}
"""``get_stats()`` key → (metric, help, divisor to the metric's unit); counts since start."""


class _Scraped(Collector):
    """What the route read just before rendering (set, then rendered, with no await between)."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.oldest_pending: float = 0.0
        self.pool: dict[str, int] = {}
        self.scrape_seconds: float = 0.0

    def collect(self) -> Iterator[Metric]:
        by_status = GaugeMetricFamily(
            "threadline_runs", "Runs in the database by status", labels=["status"]
        )
        for status in sorted(set(RUN_STATUSES) | set(self.runs)):
            by_status.add_metric([status], self.runs.get(status, 0))
        yield by_status
        yield GaugeMetricFamily(
            "threadline_queue_depth",
            "Pending runs (queued, not claimed yet)",
            value=self.runs.get("pending", 0),
        )
        yield GaugeMetricFamily(
            "threadline_oldest_pending_run_age_seconds",
            "Age of the oldest pending run (0 when none)",
            value=self.oldest_pending,
        )
        in_use = self.pool.get("pool_size", 0) - self.pool.get("pool_available", 0)
        yield GaugeMetricFamily(
            "threadline_pool_connections_in_use",
            "Connections taken out of the pool",
            value=max(in_use, 0),
        )
        for key, (name, text) in POOL_GAUGES.items():
            yield GaugeMetricFamily(name, text, value=self.pool.get(key, 0))
        for key, (name, text, divisor) in POOL_COUNTERS.items():
            yield CounterMetricFamily(name, text, value=self.pool.get(key, 0) / divisor)
        yield GaugeMetricFamily(
            "threadline_metrics_scrape_seconds",
            "How long reading the database and pool figures of this scrape took",
            value=self.scrape_seconds,
        )


class ServiceMetrics:
    """One app's metrics: a registry of its own with the process's metrics and the figures read
    at each scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        for metric in PROCESS_METRICS:
            self.registry.register(metric)
        self._scraped = _Scraped()
        self.registry.register(self._scraped)

    async def render(self, pool: Pool) -> bytes:
        """The Prometheus text exposition, with the queue and pool read now."""
        started = time.perf_counter()
        stats = dict(pool.get_stats())  # before this scrape takes a connection itself
        async with pool.connection() as conn:
            counts, oldest = await run_stats.status_counts(conn)
        scraped = self._scraped
        scraped.runs, scraped.oldest_pending, scraped.pool = counts, oldest, stats
        scraped.scrape_seconds = time.perf_counter() - started
        return generate_latest(self.registry)
