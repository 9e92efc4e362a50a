"""Prometheus metrics (``GET /metrics``, ``api.http.routes.metrics``), names prefixed
``threadline_``.

Two kinds:

- **Measured as they happen**, in this process: claim delay, attempts started, takeovers (the
  workers, :func:`attempt_claimed`), event-log batches (:func:`observe_event_batch`, the event
  writer), step durations (:func:`observe_step`; :class:`StepTimer` times each node's step from
  its superstep's start, in the executor), SSE clients (``api.http.sse``). They
  are module-level metrics registered in no global registry: each app's
  :class:`ServiceMetrics` has a registry of its own that includes them, so several apps in one
  process never collide (they then share these counts, which are per process).
- **Read at scrape time**: runs by status, queue depth and the oldest pending run's age (one
  query, ``api.store.run_stats``, so every replica reports the same queue), and the
  connection pool's statistics (``psycopg_pool``'s ``get_stats()``).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

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
DELTA_CACHE_READS = Counter(
    "threadline_delta_cache_reads",
    "Reads of a root checkpoint's DeltaChannel values: served from the values a run's end kept "
    "in memory (hit) or rebuilt from storage (miss)",
    ["result"],
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
    DELTA_CACHE_READS,
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


def attempt_claimed(attempt: int, created_at: datetime, claimed_at: datetime) -> None:
    """A worker claimed a run as its attempt ``attempt``. The first attempt's claim delay is
    ``claimed_at - created_at``, both the database's (``api.store.claimed_run``): the claim sets
    ``updated_at`` to its ``now()``, so no clock but the database's is read."""
    ATTEMPTS.inc()
    if attempt > 1:
        TAKEOVERS.inc()
        return
    CLAIM_DELAY.observe(max((claimed_at - created_at).total_seconds(), 0.0))
