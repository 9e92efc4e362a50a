"""The rounds of ``bench.request_floor``: every item once per round, in an order shuffled each
round, each item's seconds and the CPU around it recorded."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

from bench import request_probes, service
from bench.request_cpu import CpuMeter, spent
from bench.workloads import make

LABELS = {
    "floor": "floor: the no-work graph in-process (stock AsyncPostgresSaver)",
    "service_two_requests": "service: POST /threads + POST /runs/stream to `end`",
    "post_threads": "service: POST /threads alone",
    "run_request": "service: POST /threads/{id}/runs/stream alone, to `end`",
    "service_ok": "service: GET /ok (middleware stack + SELECT 1)",
    "bare_get": "bare Starlette/uvicorn: GET /ok -> {}",
    "bare_sse": "bare Starlette/uvicorn: SSE of the run's 21 events, to `end`",
    "pg_insert": "PostgreSQL: autocommit INSERT on a pooled connection",
    "pg_select": "PostgreSQL: SELECT 1 on a pooled connection",
}
ITEMS = tuple(LABELS)
PLACES: dict[str, tuple[str | None, str | None]] = {
    "floor": (None, "floor"),
    "service_two_requests": ("service", "service"),
    "post_threads": ("service", "service"),
    "run_request": ("service", "service"),
    "service_ok": ("service", "service"),
    "bare_get": ("bare", None),
    "bare_sse": ("bare", None),
    "pg_insert": (None, "floor"),
    "pg_select": (None, "floor"),
}
"""Where each item spends CPU besides this process: (server, database) (``request_cpu``)."""


class Harness:
    """What the rounds use: the floor's graph and pool, clients of the service and bare app."""

    def __init__(
        self, graph: Any, pool: Any, svc: Any, bare: Any, events: int, meter: CpuMeter
    ) -> None:
        self.graph, self.pool, self.svc, self.bare, self.events = graph, pool, svc, bare, events
        self.meter = meter
        self.work = make("nowork")
        self.thread_id = ""
        """The thread ``run_request`` runs on, made at the round's start."""
        self.samples: dict[str, list[float]] = {k: [] for k in ITEMS}
        self.cpu: dict[str, list[dict[str, float]]] = {k: [] for k in ITEMS}
        self.split: dict[str, list[float]] = {"post_threads": [], "run_request": []}

    async def service_two_requests(self) -> float:
        r = await service.one_run(self.svc, 0, 0.0, workload=self.work, form="threads")
        if not r.ok or r.ttfe is None or r.ttfe_run is None:
            raise RuntimeError(f"a service run failed: {r.error}")
        threads = r.ttfe - r.ttfe_run  # from POST /threads to the run's request
        self.split["post_threads"].append(threads)
        self.split["run_request"].append(r.latency - threads)
        return r.latency

    async def post_threads(self) -> float:
        return (await request_probes.post_thread(self.svc))[0]

    async def run_request(self) -> float:
        return await request_probes.run_request(self.svc, self.thread_id)

    def probes(self) -> dict[str, Callable[[], Awaitable[float]]]:
        return {
            "floor": lambda: request_probes.floor_run(self.graph),
            "service_two_requests": self.service_two_requests,
            "post_threads": self.post_threads,
            "run_request": self.run_request,
            "service_ok": lambda: request_probes.get_ok(self.svc),
            "bare_get": lambda: request_probes.get_ok(self.bare),
            "bare_sse": lambda: request_probes.bare_sse(self.bare, self.events),
            "pg_insert": lambda: request_probes.pg_insert(self.pool),
            "pg_select": lambda: request_probes.pg_select(self.pool),
        }

    async def rounds(self, count: int, *, record: bool, rng: random.Random) -> None:
        probes = self.probes()
        order = list(ITEMS)
        for _ in range(count):
            rng.shuffle(order)
            self.meter.refresh()
            _, self.thread_id = await request_probes.post_thread(self.svc)
            for key in order:
                before = self.meter.read(*PLACES[key])
                seconds = await probes[key]()
                cpu = spent(self.meter.read(*PLACES[key]), before)
                if record:
                    self.samples[key].append(seconds)
                    self.cpu[key].append(cpu)
        if not record:
            self.split = {k: [] for k in self.split}
