"""Replicas on one database and one data directory, and kill -9 recovery.

- Any replica serves any run's stream, live or replayed, with the same event ids.
- A replica killed mid-run has its run taken over by another after the lease expires, as
  attempt 2 of the same run: every line of ``counter.txt`` once, every event once.
- One server killed twice and restarted (the evaluation's kill harness): same guarantees.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.utils.kill_plan import KillPlan, KillPoint, is_custom
from tests.utils.kills import run_with_kills
from tests.utils.runs import MODES, start_run, until
from tests.utils.server import ServerProcess
from tests.utils.sse import StreamFollower
from tests.utils.tasks import counter
from tests.utils.workspace import counter_lines

LEASE = 3.0


def same_events(a: list[Any], b: list[Any]) -> bool:
    return [(e.id, e.event, e.data) for e in a] == [(e.id, e.event, e.data) for e in b]


async def replay(server: ServerProcess, tid: str, rid: str) -> list[Any]:
    follower = StreamFollower(tid, rid)
    return await follower.follow([server], timeout=30)


async def test_any_replica_streams_and_replays_any_run(
    database_url: str, tmp_path: Path, make_server: Callable[..., ServerProcess]
) -> None:
    data = tmp_path / "data"
    a = make_server(database_url, data, name="a")
    b = make_server(database_url, data, name="b")
    a.start()
    b.start()
    tid, rid = await start_run(
        a, {"assistant_id": "agent", "input": counter(4, 0.2), "stream_mode": MODES}
    )
    # Live through B, from the first event.
    live_b = await StreamFollower(tid, rid).follow([b], timeout=60)
    assert live_b[0].event == "metadata" and live_b[0].data == {"run_id": rid, "attempt": 1}
    assert live_b[-1].event == "end" and live_b[-1].data["status"] == "success"
    assert [int(e.id) for e in live_b] == list(range(1, len(live_b) + 1))

    # Replayed through either replica: the same events with the same ids.
    assert same_events(await replay(a, tid, rid), live_b)
    assert same_events(await replay(b, tid, rid), live_b)
    # Half from A, the rest from B with Last-Event-ID.
    half = len(live_b) // 2
    rest = await StreamFollower(tid, rid, last_event_id=half).follow([b], timeout=30)
    assert same_events(live_b[:half] + rest, live_b)

    async with httpx.AsyncClient(timeout=30) as http:
        for server in (a, b):
            run = (await http.get(f"{server.url}/threads/{tid}/runs/{rid}")).json()
            assert run["status"] == "success" and run["attempt"] == 1
            state = (await http.get(f"{server.url}/threads/{tid}/state")).json()
            assert state["values"]["status"] == "verified"
    assert sorted(counter_lines(data, tid)) == ["1", "2", "3", "4"]


@pytest.mark.slow
async def test_a_killed_replicas_run_is_taken_over(
    database_url: str, tmp_path: Path, make_server: Callable[..., ServerProcess]
) -> None:
    data = tmp_path / "data"
    a = make_server(database_url, data, name="a")
    b = make_server(database_url, data, name="b")
    await asyncio.gather(asyncio.to_thread(a.start), asyncio.to_thread(b.start))
    b.pause()  # B is up but frozen, so A claims the run
    tid, rid = await start_run(
        a, {"assistant_id": "agent", "input": counter(4, 1.0), "stream_mode": MODES}
    )
    from_a = StreamFollower(tid, rid)

    def tools_in_flight() -> int:
        started = sum(1 for e in from_a.events if is_custom("tool_started")(e))
        return started - sum(1 for e in from_a.events if is_custom("tool_finished")(e))

    reading = asyncio.create_task(from_a.follow([a], timeout=60))
    await until(
        from_a,
        lambda: tools_in_flight() > 0,
        30,
        why="the run ended on A before A could be killed",
    )
    b.resume()  # A holds a live lease: B must not take the run yet
    await asyncio.sleep(0.5)
    assert tools_in_flight() > 0 and not from_a.ended
    # Kill A while its first tool call is in flight.
    killed_at = time.monotonic()
    a.kill()
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reading
    seen_on_a = list(from_a.events)
    assert seen_on_a and seen_on_a[-1].event != "end"

    # The same client carries on through B, from the last event it saw.
    from_b = StreamFollower(tid, rid, last_event_id=from_a.last_event_id)

    async def until_attempt_2() -> float:
        while not any(e.event == "metadata" and e.data["attempt"] == 2 for e in from_b.events):
            from_b.changed.clear()
            await from_b.changed.wait()
        return time.monotonic() - killed_at

    following = asyncio.create_task(from_b.follow([b], timeout=60))
    takeover = await asyncio.wait_for(until_attempt_2(), timeout=LEASE + 10)
    assert takeover <= LEASE + 5, f"B took over after {takeover:.1f} s"
    await following
    union = seen_on_a + from_b.events
    assert [int(e.id) for e in union] == list(range(1, len(union) + 1))
    assert [e.data["attempt"] for e in union if e.event == "metadata"] == [1, 2]
    assert union[-1].event == "end" and union[-1].data == {"run_id": rid, "status": "success"}
    assert time.monotonic() - killed_at < LEASE + 25

    async with httpx.AsyncClient(base_url=b.url, timeout=30) as http:
        run = (await http.get(f"/threads/{tid}/runs/{rid}")).json()
        assert run["status"] == "success" and run["attempt"] == 2
        thread = (await http.get(f"/threads/{tid}")).json()
        assert thread["status"] == "idle"
        assert thread["values"]["status"] == "verified"
        # The full replay (from B) is exactly what the client pieced together.
        assert same_events(await replay(b, tid, rid), union)
    assert sorted(counter_lines(data, tid), key=int) == ["1", "2", "3", "4"]
    # The call A was running when it died (its sandboxed process died with A) ran again on B
    # and was applied once: each line has exactly one "applied" record.
    attempts = (data / "workspaces" / tid / ".counter-attempts").read_text().split("\n")
    applied = [row.split()[2] for row in attempts if " applied " in row]
    assert sorted(applied, key=int) == ["1", "2", "3", "4"], attempts


@pytest.mark.slow
async def test_kill_and_restart_twice_with_the_harness(
    database_url: str, tmp_path: Path, make_server: Callable[..., ServerProcess]
) -> None:
    server = make_server(database_url, tmp_path / "data", name="solo")
    server.start()
    plan = KillPlan(
        [
            KillPoint(counter_lines=1),
            KillPoint(event=is_custom("tool_started"), nth=3),
        ]
    )
    outcome = await run_with_kills(server, counter(4, 0.3), plan, timeout=90)
    assert outcome.problems(counter_n=4) == []
    assert len(outcome.kills) == 2
    assert outcome.attempts == [1, 2, 3]
    assert outcome.run["attempt"] == 3
    assert outcome.connections >= 3  # it reconnected after each kill
    assert outcome.thread["values"]["status"] == "verified"
    assert outcome.thread["status"] == "idle"
