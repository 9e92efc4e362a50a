"""What the hub spares: notifications nobody else needs, and a stream's first read.

A process's own streams take the events it stores from memory; a notification is for the other
processes' streams (replicas on the same database). A notifying commit takes PostgreSQL's one
lock on the notification queue, so a process that is alone stores its events without one
(``api.durable.hub.Hub.peers``), and a second process is noticed within ``PEERS_SECONDS``: then its
streams are woken at once again. A stream of a run this process executes and has stored nothing
of yet (one a request just started) reads nothing back: every event comes from memory.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from api.contract.runs import RunCreate
from api.durable.event_writer import Emitter
from api.durable.hub import PEERS_SECONDS, STREAM_POLL_SECONDS, Hub
from api.http.sse import run_events
from api.lifecycle import open_service
from api.platform.settings import Settings
from api.store import events, runs
from tests.utils.runs import MODES, claimed_run, start_run
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter


async def _until(check: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_a_hub_sees_the_other_processes_listeners_come_and_go(database_url: str) -> None:
    a, b = Hub(database_url), Hub(database_url)
    assert a.peers, "unknown until the first look-up: notify"
    await a.start()
    try:
        assert await _until(lambda: not a.peers, 3 * PEERS_SECONDS), "alone, yet peers"
        # A plain LISTEN (not a threadline process) does not count.
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as other:
            await other.execute(f"LISTEN {events.EVENTS_CHANNEL}")
            await asyncio.sleep(2 * PEERS_SECONDS)
            assert not a.peers
        await b.start()
        try:
            assert await _until(lambda: a.peers and b.peers, 3 * PEERS_SECONDS)
        finally:
            await b.stop()
        assert await _until(lambda: not a.peers, 3 * PEERS_SECONDS), "B left, yet peers"
    finally:
        await a.stop()


async def test_stored_events_notify_only_while_another_process_listens(runtime: Any) -> None:
    run = await claimed_run(runtime)
    hub = Hub(runtime.database.url)  # not started: ``peers`` is set by hand
    emitter = Emitter(runtime.pool, hub, run.run_id, run.attempt, run.thread_id)
    url = runtime.database.url
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as listener:
        await listener.execute(f"LISTEN {events.EVENTS_CHANNEL}")

        async def heard() -> list[str]:
            return [n.payload async for n in listener.notifies(timeout=0.5)]

        hub.peers = False
        await emitter.emit("custom", {"i": 1})
        await emitter.barrier()
        assert await heard() == []

        hub.peers = True
        await emitter.emit("custom", {"i": 2})
        await emitter.barrier()
        assert await heard() == [f"{run.run_id}:2"]
    # Both batches are stored either way.
    async with runtime.pool.connection() as conn:
        assert await events.last_seq(conn, run.run_id) == 2


async def test_a_replica_streams_another_replicas_run_live(
    database_url: str, tmp_path: Path, make_server: Callable[..., ServerProcess]
) -> None:
    """A run executed by A, streamed through B: each event reaches B's client well within the
    stream's poll (2 s), so A's commits notified B (A saw B's listener)."""
    data = tmp_path / "data"
    a = make_server(database_url, data, name="a")
    b = make_server(database_url, data, name="b")
    await asyncio.gather(asyncio.to_thread(a.start), asyncio.to_thread(b.start))
    await asyncio.sleep(3 * PEERS_SECONDS)  # each has looked the other up since
    tid, rid = await start_run(
        a, {"assistant_id": "agent", "input": counter(6, 0.3), "stream_mode": MODES}
    )
    arrived: dict[int, float] = {}
    async with (
        httpx.AsyncClient(timeout=60) as http,
        http.stream(
            "GET",
            f"{b.url}/threads/{tid}/runs/{rid}/stream",
            headers={"Last-Event-ID": "-1"},
        ) as resp,
    ):
        assert resp.status_code == 200
        seq = 0
        async for line in resp.aiter_lines():
            if line.startswith("id:"):
                seq = int(line[3:])
            elif line == "" and seq and seq not in arrived:
                arrived[seq] = time.time()
    with psycopg.connect(database_url) as conn:
        stored = dict(
            conn.execute(
                "SELECT seq, extract(epoch FROM created_at) FROM run_events WHERE run_id = %s",
                (rid,),
            ).fetchall()
        )
    assert set(arrived) == set(stored)
    # From its commit to B's client, per event (one machine, one clock; a negative delay would
    # be clock noise).
    live = [arrived[s] - float(stored[s]) for s in stored if arrived[s] - float(stored[s]) > 0]
    assert len(live) >= 10, (len(live), len(stored))
    # Through the poll alone, an event would wait 1 s on average (0 to 2 s).
    assert statistics.median(live) < 0.4, sorted(live)


def _ids(frames: list[bytes]) -> list[int]:
    text = b"".join(frames).decode()
    return [int(line[3:]) for line in text.splitlines() if line.startswith("id:")]


async def test_a_stream_of_a_run_started_here_reads_nothing_back(
    settings: Settings, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real_read = events.read

    async def read(conn: Any, run_id: str, after: int) -> list[dict[str, Any]]:
        reads.append(after)
        return await real_read(conn, run_id, after)

    monkeypatch.setattr(events, "read", read)
    modes = ["updates", "custom"]
    async with open_service(settings, runtime=runtime) as svc:
        run = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=counter(3), if_not_exists="create"),
        )
        assert svc.hub.stored_nothing_after(run["run_id"], 0), "not started here at once"
        live = [f async for f in run_events(svc.pool, svc.hub, run["run_id"], after=0, modes=modes)]
        assert reads == [], "the live stream read the table"
        # Each event once, in order (those of the modes asked for), metadata first, end last.
        seen = _ids(live)
        assert seen == sorted(set(seen)) and len(seen) > 10, seen
        assert b"event: metadata" in live[0] and b"event: end" in live[-1]
        # Once the run is over here, a stream reads the table, and finds the same events.
        async with runtime.pool.connection() as conn:
            stored = await events.last_seq(conn, run["run_id"])
        assert not svc.hub.stored_nothing_after(run["run_id"], 0)
        again = [
            f async for f in run_events(svc.pool, svc.hub, run["run_id"], after=0, modes=modes)
        ]
        assert reads == [0] and b"".join(again) == b"".join(live)
        assert _ids(again)[-1] == stored


async def test_streams_waiting_on_a_run_executing_elsewhere_are_polled_for_by_the_hub(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While its listener is connected, a process polls for all such streams in one statement
    a second: a stream reads the table once to start, then only when the hub says its run has
    more (here events stored with no notification, as by a process that did not know this one
    listens yet), and it ends when its run is removed (a rollback)."""
    reads: list[int] = []
    checks: list[str] = []
    real_read, real_by_id = events.read, runs.by_id

    async def read(conn: Any, run_id: str, after: int) -> list[dict[str, Any]]:
        reads.append(after)
        return await real_read(conn, run_id, after)

    async def by_id(conn: Any, run_id: str) -> Any:
        checks.append(run_id)
        return await real_by_id(conn, run_id)

    monkeypatch.setattr(events, "read", read)
    monkeypatch.setattr(runs, "by_id", by_id)
    run = await claimed_run(runtime)  # held by a worker of no process here: "elsewhere"
    hub = Hub(runtime.database.url)
    await hub.start()
    arrived: list[tuple[float, bytes]] = []

    async def follow() -> None:
        stream = run_events(runtime.pool, hub, run.run_id, after=0, modes=["custom"])
        async for frames in stream:
            arrived.append((time.monotonic(), frames))

    follower = asyncio.create_task(follow())
    try:
        # Longer than a stream's own timer (it would have read twice and checked its run twice).
        await asyncio.sleep(2.5 * STREAM_POLL_SECONDS)
        assert (reads, checks, arrived) == ([0], [], [])
        elsewhere = Hub(runtime.database.url)  # not started: it notifies nobody
        elsewhere.peers = False
        emitter = Emitter(runtime.pool, elsewhere, run.run_id, run.attempt, run.thread_id)
        await emitter.emit("custom", {"n": 1})
        await emitter.barrier()
        stored = time.monotonic()
        assert await _until(lambda: bool(arrived), 3 * PEERS_SECONDS), "never woken"
        assert arrived[0][0] - stored < 2 * PEERS_SECONDS + 0.5
        assert b'"n":1' in arrived[0][1] and reads == [0, 0]
        async with runtime.pool.connection() as conn:
            await conn.execute("DELETE FROM runs WHERE run_id = %s", (run.run_id,))
        await asyncio.wait_for(follower, timeout=3 * PEERS_SECONDS)
        assert checks == [run.run_id]
    finally:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        await hub.stop()


async def test_without_its_listener_a_stream_reads_on_a_timer_of_its_own(runtime: Any) -> None:
    """A hub not connected (never started here) polls for nobody: the stream's own timer finds
    events stored with no notification."""
    run = await claimed_run(runtime)
    hub = Hub(runtime.database.url)
    assert hub.wait_seconds() == STREAM_POLL_SECONDS
    stream = run_events(runtime.pool, hub, run.run_id, after=0, modes=["custom"])
    first = asyncio.ensure_future(anext(stream))
    try:
        await asyncio.sleep(0.3)  # its first read found nothing: it waits
        elsewhere = Hub(runtime.database.url)
        elsewhere.peers = False
        emitter = Emitter(runtime.pool, elsewhere, run.run_id, run.attempt, run.thread_id)
        await emitter.emit("custom", {"n": 1})
        await emitter.barrier()
        frames = await asyncio.wait_for(first, timeout=STREAM_POLL_SECONDS + 1.5)
        assert b'"n":1' in frames
    finally:
        first.cancel()
        await stream.aclose()
