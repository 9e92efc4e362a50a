"""The timed pieces of ``bench.request_floor``: each call does one thing once and returns the
seconds it took (or raises): a floor run, the service's requests, a bare HTTP round trip and SSE
stream, one PostgreSQL write."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph.state import CompiledStateGraph

from api.durable.saver import PooledSaver
from api.engine.runtime import saver_concurrency
from api.platform.database import Pool, open_pool, prepare_schema
from api.platform.settings import Settings
from bench import nowork
from bench.direct import STREAM_MODES

WRITE_TABLE = "request_floor_write"
WRITE_BODY = json.dumps({"type": "updates", "data": {"tools": {"results": [42]}}, "seq": 7})
"""One event-sized JSON row (~70 B), what the service's event log writes per event."""


@asynccontextmanager
async def floor_graph(
    url: str, data_dir: Path, pool_size: int
) -> AsyncIterator[tuple[CompiledStateGraph[Any, Any, Any, Any], Pool]]:
    """The no-work graph on LangGraph's stock ``AsyncPostgresSaver`` (the issue's floor), on a
    pool opened as the server opens it, as ``bench.direct.run_level`` does with
    ``floor_saver="stock"``; with a table for :func:`pg_insert`."""
    settings = Settings(database_url=url, data_dir=data_dir, pool_max_size=pool_size)
    async with open_pool(url, max_size=pool_size, min_size=settings.pool_min_size) as pool:
        await prepare_schema(pool, PooledSaver(pool, concurrency=saver_concurrency(pool_size)))
        async with pool.connection() as conn:
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {WRITE_TABLE} (id bigserial PRIMARY KEY, body text)"
            )
        yield nowork.builder().compile(checkpointer=AsyncPostgresSaver(pool)), pool


async def floor_run(graph: CompiledStateGraph[Any, Any, Any, Any]) -> float:
    """One run of the no-work graph on a new thread, its chunks read to the last."""
    config: RunnableConfig = {
        "configurable": {"thread_id": str(uuid.uuid4())},
        "recursion_limit": 4 * nowork.SUPERSTEPS,
    }
    t0 = time.perf_counter()
    verified = False
    async for mode, chunk in graph.astream(  # type: ignore[call-overload]
        dict(nowork.INPUT), config, stream_mode=STREAM_MODES, durability="sync"
    ):
        if mode == "custom" and isinstance(chunk, dict) and chunk.get("type") == "verify":
            verified = bool(chunk.get("passed"))
    elapsed = time.perf_counter() - t0
    if not verified:
        raise RuntimeError("the floor's run did not pass its check")
    return elapsed


def run_body() -> dict[str, Any]:
    """The stream request's body, as ``bench.service.one_run`` sends it for the no-work graph."""
    return {
        "assistant_id": nowork.GRAPH_ID,
        "input": dict(nowork.INPUT),
        "stream_mode": STREAM_MODES,
    }


async def post_thread(client: httpx.AsyncClient) -> tuple[float, str]:
    t0 = time.perf_counter()
    resp = await client.post("/threads", json={})
    elapsed = time.perf_counter() - t0
    if resp.status_code != 200:
        raise RuntimeError(f"POST /threads: HTTP {resp.status_code}: {resp.text[:200]}")
    return elapsed, str(resp.json()["thread_id"])


async def get_ok(client: httpx.AsyncClient) -> float:
    t0 = time.perf_counter()
    resp = await client.get("/ok")
    elapsed = time.perf_counter() - t0
    if resp.status_code != 200:
        raise RuntimeError(f"GET /ok: HTTP {resp.status_code}: {resp.text[:200]}")
    return elapsed


async def read_stream(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], events: list[dict[str, str]]
) -> tuple[float, str | None]:
    """``POST path`` read as SSE: the seconds to the ``end`` event's data (to the end of the
    stream when none comes), and its data. The events received are appended to ``events``."""
    t0 = time.perf_counter()
    latency: float | None = None
    end: str | None = None
    current: dict[str, str] = {}
    async with client.stream("POST", path, json=body) as resp:
        if resp.status_code != 200:
            await resp.aread()
            raise RuntimeError(f"POST {path}: HTTP {resp.status_code}: {resp.text[:200]}")
        async for line in resp.aiter_lines():
            if line == "":
                if current:
                    events.append(current)
                    if current.get("event") == "end" and latency is None:
                        latency, end = time.perf_counter() - t0, current.get("data")
                current = {}
                continue
            if line.startswith(":"):
                continue  # heartbeat comment
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            current[name] = current[name] + "\n" + value if name in current else value
    return (time.perf_counter() - t0 if latency is None else latency), end


async def run_request(
    client: httpx.AsyncClient, thread_id: str, events: list[dict[str, str]] | None = None
) -> float:
    """``POST /threads/{id}/runs/stream`` on an existing thread, read to ``end``."""
    received: list[dict[str, str]] = [] if events is None else events
    path = f"/threads/{thread_id}/runs/stream"
    elapsed, end = await read_stream(client, path, run_body(), received)
    status = json.loads(end).get("status") if end else None
    if status != "success":
        raise RuntimeError(f"the run ended with status {status!r} ({len(received)} events)")
    return elapsed


async def bare_sse(client: httpx.AsyncClient, expected: int) -> float:
    """The bare app's stream of a run's events (``bench.bare_app``), read to ``end``."""
    received: list[dict[str, str]] = []
    elapsed, _ = await read_stream(client, "/sse", run_body(), received)
    if len(received) != expected:
        raise RuntimeError(f"the bare stream sent {len(received)} events, not {expected}")
    return elapsed


async def pg_insert(pool: Pool) -> float:
    """One durable write: an autocommit ``INSERT`` (its own transaction, committed in the same
    round trip) on a connection taken from the pool, as the service's statements run."""
    t0 = time.perf_counter()
    async with pool.connection() as conn:
        await conn.execute(f"INSERT INTO {WRITE_TABLE} (body) VALUES (%s)", (WRITE_BODY,))
    return time.perf_counter() - t0


async def pg_select(pool: Pool) -> float:
    """One round trip that writes nothing (``SELECT 1``) on a pooled connection."""
    t0 = time.perf_counter()
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")
    return time.perf_counter() - t0
