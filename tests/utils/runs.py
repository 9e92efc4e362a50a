"""Driving runs on a test server: new threads, runs started and waited for, their event streams.

Over plain HTTP (an ``httpx.AsyncClient`` on the server's base URL), the official SDK's streams
(``collect``), or a ``StreamFollower`` of ``tests.utils.sse`` (``until``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

import httpx
from langgraph_sdk import get_client

from api.store import runs, threads
from api.store.claimed_run import ClaimedRun
from tests.utils.server import ServerProcess
from tests.utils.sse import SSEEvent, StreamFollower, read_sse

MODES = ["updates", "custom"]
"""The stream modes the tests read: node updates and the agent's own events."""


@contextlib.asynccontextmanager
async def sdk_client(url: str, **kwargs: Any) -> AsyncIterator[Any]:
    """The official SDK's client on ``url`` (``get_client`` keywords: headers, ...), closed on
    exit so that none of its connections outlives the test. Typed ``Any``: its results are
    unions a test indexes freely."""
    async with get_client(url=url, **kwargs) as client:
        yield client


async def claimed_run(runtime: Any, thread_id: str | None = None) -> ClaimedRun:
    """A run of a new thread (or of ``thread_id``, which has no other active run), claimed from
    the queue (running, attempt 1) by a worker called ``test``, made straight in ``runtime``'s
    database: for driving the event writer without a server."""
    async with runtime.pool.connection() as conn:
        if thread_id is None:
            thread_id = str(uuid.uuid4())
            await threads.create(conn, thread_id, {}, None)
        await runs.insert(
            conn,
            thread_id=thread_id,
            assistant_id="agent",
            kwargs={},
            metadata={},
            multitask_strategy="reject",
        )
        [(run, _)] = await runs.claim(conn, "test", 30.0)
    return run


async def new_thread(http: httpx.AsyncClient, **body: Any) -> str:
    """``POST /threads`` with ``body`` (metadata, thread_id, ...); the new thread's id."""
    response = await http.post("/threads", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["thread_id"])


async def start_run(server: ServerProcess, body: dict[str, Any]) -> tuple[str, str]:
    """A new thread on ``server`` and a background run on it with ``body``: (thread, run) ids."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        tid = await new_thread(http)
        response = await http.post(f"/threads/{tid}/runs", json=body)
        assert response.status_code == 200, response.text
        return tid, response.json()["run_id"]


async def wait_status(
    http: httpx.AsyncClient,
    tid: str,
    rid: str,
    want: str | Collection[str],
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Poll the run until its status is ``want`` (one status or any of several); the run."""
    wanted = {want} if isinstance(want, str) else set(want)
    deadline = time.monotonic() + timeout
    while True:
        run = (await http.get(f"/threads/{tid}/runs/{rid}")).json()
        if run["status"] in wanted:
            return dict(run)
        assert time.monotonic() < deadline, f"run still {run['status']!r}, expected {want!r}"
        await asyncio.sleep(0.1)


async def read_events(
    response: httpx.Response, *, stop: Any = None, timeout: float = 60.0
) -> list[SSEEvent]:
    """Events (no comments) of an SSE response until ``end``, or until ``stop(events)`` says so."""
    out: list[SSEEvent] = []

    async def read() -> None:
        async for frame in read_sse(response):
            if frame.is_comment:
                continue
            out.append(frame)
            if frame.event == "end" or (stop and stop(out)):
                return

    await asyncio.wait_for(read(), timeout)
    return out


async def collect(stream: Any, timeout: float = 60.0) -> list[Any]:
    """Every part of an SDK stream (``client.runs.stream``, ``join_stream``), bounded in time."""

    async def read() -> list[Any]:
        return [part async for part in stream]

    return await asyncio.wait_for(read(), timeout)


async def until(
    follower: StreamFollower,
    condition: Callable[[], bool],
    timeout: float,
    *,
    why: str = "the run ended before the moment the test waits for",
) -> None:
    """Wait (bounded) until ``condition()`` holds for what ``follower`` has read so far; fails
    with ``why`` if the run ends first."""

    async def wait() -> None:
        while not condition():
            assert not follower.ended, why
            follower.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(follower.changed.wait(), timeout=0.05)

    await asyncio.wait_for(wait(), timeout)
