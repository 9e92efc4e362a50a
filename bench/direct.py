"""The floor: the service's own graph run in-process on a ``PooledSaver``: no HTTP, no queue."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from api.builtin_agent.wiring import build_agent
from api.database import PooledSaver, open_pool, prepare_schema
from api.runtime import saver_concurrency
from api.settings import Settings
from bench.measure import PgSampler, ProcSampler, RunResult, drive, summarize

STREAM_MODES = ["updates", "custom"]


def task_input(n: int, delay: float) -> dict[str, Any]:
    return {"task": {"name": "counter", "params": {"n": n, "delay": delay}}}


async def run_level(
    *,
    url: str,
    data_dir: Path,
    pool_size: int,
    concurrency: int,
    runs: int,
    warmup: int,
    n: int,
    delay: float,
    timeout: float,
    probe: Callable[[], dict[str, Any]] | None = None,
    pg: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Open a pool and graph like the server does, warm up, then measure ``runs`` runs."""
    settings = Settings(database_url=url, data_dir=data_dir, pool_max_size=pool_size)
    async with open_pool(url, max_size=pool_size) as pool:
        saver = PooledSaver(pool, concurrency=saver_concurrency(pool_size))
        await prepare_schema(pool, saver)
        graph = build_agent(settings, saver)
        recursion_limit = settings.limits.recursion_limit()

        async def one(_: int) -> RunResult:
            config: RunnableConfig = {
                "configurable": {"thread_id": str(uuid.uuid4())},
                "recursion_limit": recursion_limit,
            }
            t0 = time.perf_counter()
            first: float | None = None
            chunks = steps = 0
            verified = False
            async for mode, chunk in graph.astream(  # type: ignore[call-overload]
                task_input(n, delay), config, stream_mode=STREAM_MODES, durability="sync"
            ):
                if first is None:
                    first = time.perf_counter() - t0
                chunks += 1
                if mode == "custom" and isinstance(chunk, dict):
                    if chunk.get("type") == "verify":
                        verified = bool(chunk.get("passed"))
                    elif chunk.get("type") == "step" and chunk.get("node") == "agent":
                        steps += 1
            latency = time.perf_counter() - t0
            return RunResult(
                ok=verified,
                latency=latency,
                ttfe=first,
                events=chunks,
                steps=steps,
                error=None if verified else "the task's check did not pass",
            )

        for i in range(warmup):
            await one(i)
        before = probe() if probe else None
        sampler = ProcSampler(os.getpid()).start()
        pg_sampler = PgSampler(*pg).start() if pg else None
        results, wall = await drive(concurrency, runs, one, timeout=timeout)
        usage = sampler.stop()
        pg_usage = pg_sampler.stop() if pg_sampler else None
        after = probe() if probe else None
    return {
        **summarize(results, wall),
        "process": usage,
        "postgres": pg_usage,
        "probe": {"before": before, "after": after} if probe else None,
        "samples": [r.as_dict() for r in results],
    }
