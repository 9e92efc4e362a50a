"""The worker pool in-process: leases and claims racing each other."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from api.hub import Hub
from api.schemas import RunCreate
from api.service import Service
from api.store import runs as runs_store
from api.worker import Workers


def counter(n: int, delay: float) -> dict[str, Any]:
    return {"task": {"name": "counter", "params": {"n": n, "delay": delay}}}


async def test_run_claimed_while_a_lease_renewal_is_in_flight_is_not_taken_for_lost(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renewal's result lists the runs held when it ran; a run claimed while it was in flight
    is missing from it, and must not be stopped as "lost" (it would stall until its lease
    expired and run again as attempt 2)."""
    real_renew = runs_store.renew

    async def slow_renew(conn: Any, worker_id: str, lease: float, run_ids: list[str]) -> Any:
        held = await real_renew(conn, worker_id, lease, run_ids)
        await asyncio.sleep(0.4)  # claims land while this renewal is "in flight"
        return held

    monkeypatch.setattr(runs_store, "renew", slow_renew)
    hub = Hub(runtime.database.url)
    await hub.start()
    workers = Workers(settings=settings, pool=runtime.pool, hub=hub, graphs=runtime.graphs)
    svc = Service(runtime=runtime, hub=hub)
    await workers.start()
    try:
        # A long run keeps the heartbeat renewing; short runs are claimed meanwhile.
        created = [
            await svc.create_run(
                str(uuid.uuid4()),
                RunCreate(assistant_id="agent", input=counter(2, 1.5), if_not_exists="create"),
            )
        ]
        for _ in range(8):
            await asyncio.sleep(0.15)
            created.append(
                await svc.create_run(
                    str(uuid.uuid4()),
                    RunCreate(assistant_id="agent", input=counter(1, 0.3), if_not_exists="create"),
                )
            )
        deadline = time.monotonic() + 60
        ended: list[dict[str, Any]] = []
        while len(ended) < len(created):
            assert time.monotonic() < deadline, "runs did not end"
            await asyncio.sleep(0.2)
            ended = [
                r
                for r in [await svc.refreshed_run(c["thread_id"], c["run_id"]) for c in created]
                if r["status"] not in ("pending", "running")
            ]
    finally:
        await workers.stop()
        await hub.stop()
    assert [r["status"] for r in ended] == ["success"] * len(created)
    # Every run finished in its first attempt: none was stopped and taken over.
    assert [r["attempt"] for r in ended] == [1] * len(created)
