"""Prometheus metrics (``GET /metrics``, ``api.routes.metrics``), names prefixed ``threadline_``.

Two kinds:

- **Measured as they happen**, in this process: claim delay, attempts started, takeovers (the
  workers, :func:`attempt_claimed`), event-log batches (:func:`observe_event_batch`, the event
  writer), step durations (:func:`observe_step`; :class:`StepTimer` times each node's step from
  its superstep's start, in the executor), SSE clients (``api.sse``). They
  are module-level metrics registered in no global registry: each app's
  :class:`ServiceMetrics` has a registry of its own that includes them, so several apps in one
  process never collide (they then share these counts, which are per process).
- **Read at scrape time**: runs by status, queue depth and the oldest pending run's age (one
  query, ``api.store.run_stats``, so every replica reports the same queue), and the
  connection pool's statistics (``psycopg_pool``'s ``get_stats()``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.database import Pool
from api.store import run_stats

RUN_STATUSES = ("pending", "running", "success", "error", "interrupted", "timeout")
"""Reported even when no run has them (as 0), so every series exists from the start."""

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
STEP_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

CLAIM_DELAY = Histogram(
    "threadline_claim_delay_seconds",
    "Time from a run's creation (queued) to its first claim by a worker",
    buckets=DELAY_BUCKETS,
    registry=None,
)
ATTEMPTS = Counter(
    "threadline_attempts_started",
    "Attempts claimed by this process's workers (a run's first attempt and every later one)",
    registry=None,
)
TAKEOVERS = Counter(
    "threadline_takeovers",
    "Attempts after a run's first: the run continued from its last checkpoint after its "
    "worker died, lost its lease or handed it back",
    registry=None,
)
EVENT_BATCH_SIZE = Histogram(
    "threadline_event_batch_size",
    "Events stored by one event-log write (one transaction)",
    buckets=BATCH_BUCKETS,
    registry=None,
)
EVENT_WRITE_SECONDS = Histogram(
    "threadline_event_write_seconds",
    "Duration of one event-log write (its statement and commit)",
    buckets=LATENCY_BUCKETS,
    registry=None,
)
STEP_SECONDS = Histogram(
    "threadline_step_duration_seconds",
    "Duration of a graph node's step, by node",
    ["node"],
    buckets=STEP_BUCKETS,
    registry=None,
)
SSE_CLIENTS = Gauge(
    "threadline_sse_clients",
    "SSE streams open on this process",
    registry=None,
)

PROCESS_METRICS = (
    CLAIM_DELAY,
    ATTEMPTS,
    TAKEOVERS,
    EVENT_BATCH_SIZE,
    EVENT_WRITE_SECONDS,
    STEP_SECONDS,
    SSE_CLIENTS,
)


def observe_event_batch(size: int, seconds: float) -> None:
    """One event-log write of ``size`` events that took ``seconds`` (statement and commit)."""
    EVENT_BATCH_SIZE.observe(size)
    EVENT_WRITE_SECONDS.observe(seconds)


def observe_step(node: str, seconds: float) -> None:
    """One step of graph node ``node`` that took ``seconds``."""
    STEP_SECONDS.labels(node=node).observe(seconds)


class StepTimer:
    """Step durations of one attempt, at no cost to the stream: a node's step runs from the
    superstep's start (the previous checkpoint) to its ``updates`` chunk. ``feed(mode, chunk)``
    every chunk; :meth:`checkpoint` when a checkpoint is written (the executor calls it from
    the checkpointer's barrier). The service always streams ``custom``, so LangGraph hands out
    each update as its task finishes, before the superstep's checkpoint."""

    def __init__(self) -> None:
        self._started = time.perf_counter()

    def feed(self, mode: str, chunk: Any) -> None:
        if mode == "updates" and isinstance(chunk, dict):
            took = time.perf_counter() - self._started
            for node in chunk:
                if not node.startswith("__"):
                    observe_step(node, took)

    def checkpoint(self) -> None:
        self._started = time.perf_counter()


def attempt_claimed(run: dict[str, Any]) -> None:
    """A worker claimed ``run`` (a row as ``api.store.runs.claim`` returns it) as its attempt
    ``run["attempt"]``. The first attempt's claim delay is ``updated_at - created_at``: the
    claim sets ``updated_at`` to the database's ``now()``, so no clock but the database's is
    read."""
    ATTEMPTS.inc()
    if run["attempt"] > 1:
        TAKEOVERS.inc()
        return
    try:
        created = datetime.fromisoformat(run["created_at"])
        claimed = datetime.fromisoformat(run["updated_at"])
    except (KeyError, TypeError, ValueError):
        return
    CLAIM_DELAY.observe(max((claimed - created).total_seconds(), 0.0))


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
