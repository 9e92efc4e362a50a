"""The floor: the service's own graph run in-process on a ``PooledSaver``: no HTTP, no queue."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from agent.settings import AgentSettings
from api.builtin_agent.wiring import build_agent
from api.durable.saver import PooledSaver
from api.engine.runtime import saver_concurrency
from api.platform.database import open_pool, prepare_schema
from api.platform.settings import Settings
from bench import nowork
from bench.measure import PgSampler, ProcSampler, RunResult, drive, summarize
from bench.workloads import Workload, make, task_input

STREAM_MODES = ["updates", "custom"]
FLOOR_SAVERS = ("pooled", "stock")

__all__ = ["FLOOR_SAVERS", "STREAM_MODES", "run_level", "task_input"]


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
    workload: Workload | None = None,
    floor_saver: str = "pooled",
) -> dict[str, Any]:
    """Open a pool and graph like the server does, warm up, then measure ``runs`` runs.

    ``workload``: the ``counter`` task of the built-in agent (default) or the no-work graph
    (``bench/nowork.py``, compiled on the same saver). ``floor_saver``: ``pooled`` (the
    service's ``PooledSaver``) or ``stock`` (LangGraph's ``AsyncPostgresSaver`` on the same pool,
    whose one lock serializes every checkpoint call)."""
    work = workload or make("counter", n, delay)
    settings = Settings(database_url=url, data_dir=data_dir, pool_max_size=pool_size)
    # The pool opened as the server opens it (``pool_min_size`` in the background).
    async with open_pool(url, max_size=pool_size, min_size=settings.pool_min_size) as pool:
        saver = PooledSaver(pool, concurrency=saver_concurrency(pool_size))
        await prepare_schema(pool, saver)
        if floor_saver == "stock":
            saver = AsyncPostgresSaver(pool)  # type: ignore[assignment]
        if work.name == "counter":
            agent = AgentSettings()
            graph = build_agent(settings, agent, saver)
            recursion_limit = agent.limits.recursion_limit()
        else:
            graph = nowork.builder().compile(checkpointer=saver)
            recursion_limit = 4 * nowork.SUPERSTEPS

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
                work.input, config, stream_mode=STREAM_MODES, durability="sync"
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
                steps=work.steps_per_run or steps,
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
