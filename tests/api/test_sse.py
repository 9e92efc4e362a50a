"""Raw SSE over HTTP: reconnect with ``Last-Event-ID``, replays, heartbeats, on_disconnect.

One server process for the module, on its own fresh database.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.utils.runs import MODES, new_thread, read_events, wait_status
from tests.utils.server import ServerProcess
from tests.utils.sse import SSEEvent, read_sse
from tests.utils.tasks import counter
from tests.utils.workspace import counter_lines


async def join(
    http: httpx.AsyncClient, tid: str, rid: str, last_event_id: str | None = None
) -> list[SSEEvent]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    async with http.stream("GET", f"/threads/{tid}/runs/{rid}/stream", headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        return await read_events(r)


def ids(events: list[SSEEvent]) -> list[int]:
    return [int(e.id) for e in events if e.id is not None]


def tool_finished(events: list[SSEEvent]) -> int:
    return sum(1 for e in events if e.event == "custom" and e.data.get("type") == "tool_finished")


async def test_reconnect_with_last_event_id_misses_nothing(
    http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(6, 0.2), "stream_mode": MODES}
    async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
        assert response.status_code == 200
        location = response.headers["location"]
        rid = response.headers["content-location"].rsplit("/", 1)[-1]
        assert location == f"/threads/{tid}/runs/{rid}/stream"
        # Half of the run: three of the six appends finished, then the client drops.
        first = await read_events(response, stop=lambda evs: tool_finished(evs) >= 3)
    assert first[0].event == "metadata" and first[0].data == {"run_id": rid, "attempt": 1}
    assert first[-1].event != "end"
    await asyncio.sleep(0.5)  # the run goes on without the client

    async with http.stream("GET", location, headers={"Last-Event-ID": first[-1].id}) as r:
        assert r.status_code == 200
        rest = await read_events(r)
    union = first + rest
    assert ids(union) == list(range(1, len(union) + 1)), ids(union)
    assert rest[0].id == str(int(first[-1].id) + 1)
    assert union[-1].event == "end" and union[-1].data == {"run_id": rid, "status": "success"}
    assert tool_finished(union) == 6
    assert sorted(counter_lines(server.data_dir, tid), key=int) == [str(i) for i in range(1, 7)]

    # Last-Event-ID: -1 replays the run from its first event; so does no header at all.
    replay = await join(http, tid, rid, "-1")
    assert [(e.id, e.event, e.data) for e in replay] == [(e.id, e.event, e.data) for e in union]
    assert [e.id for e in await join(http, tid, rid)] == [e.id for e in union]
    # Resuming half-way through a finished run replays the rest, then the end.
    tail = await join(http, tid, rid, str(len(union) - 3))
    assert [int(e.id) for e in tail] == [len(union) - 2, len(union) - 1, len(union)]


async def test_join_finished_run_replays_and_ends(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(1, 0), "stream_mode": MODES}
    response = await http.post(f"/threads/{tid}/runs/wait", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "verified"
    rid = (await http.get(f"/threads/{tid}/runs")).json()[0]["run_id"]

    events = await join(http, tid, rid)
    assert events[0].event == "metadata"
    assert events[-1].event == "end" and events[-1].data["status"] == "success"
    assert ids(events) == list(range(1, len(events) + 1))

    # A client that saw the end and reconnects (as EventSource does) gets the end again,
    # not an endless stream of heartbeats.
    again = await join(http, tid, rid, events[-1].id)
    assert [(e.id, e.event) for e in again] == [(events[-1].id, "end")]

    # Narrowing the modes on join: only those, plus control events.
    async with http.stream(
        "GET", f"/threads/{tid}/runs/{rid}/stream", params={"stream_mode": "updates"}
    ) as r:
        only_updates = await read_events(r)
    assert {e.event for e in only_updates} == {"metadata", "updates", "end"}


@pytest.mark.slow
async def test_heartbeat_on_an_idle_stream(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(1, 12), "stream_mode": MODES}
    rid = (await http.post(f"/threads/{tid}/runs", json=body)).json()["run_id"]
    async with http.stream("GET", f"/threads/{tid}/runs/{rid}/stream") as response:
        assert response.status_code == 200
        last_event_at: float | None = None
        heartbeat_gap: float | None = None

        async def read() -> None:
            nonlocal last_event_at, heartbeat_gap
            async for frame in read_sse(response):
                now = time.monotonic()
                if frame.is_comment and last_event_at is not None:
                    assert frame.comment == "heartbeat"
                    heartbeat_gap = now - last_event_at
                    return
                if frame.event == "custom" and frame.data.get("type") == "tool_started":
                    last_event_at = now  # from here the run is silent for 12 s
                assert frame.event != "end", "the run ended before any heartbeat"

        await asyncio.wait_for(read(), timeout=25)
    assert heartbeat_gap is not None and heartbeat_gap <= 11.0, heartbeat_gap
    cancelled = await http.post(f"/threads/{tid}/runs/{rid}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    await wait_status(http, tid, rid, "interrupted")


async def test_on_disconnect_cancel_cancels_the_run(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    body = {
        "assistant_id": "agent",
        "input": counter(3, 20),
        "stream_mode": MODES,
        "on_disconnect": "cancel",
    }
    async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
        rid = response.headers["content-location"].rsplit("/", 1)[-1]
        await read_events(
            response,
            stop=lambda evs: evs[-1].event == "custom" and evs[-1].data["type"] == "tool_started",
        )
    run = await wait_status(http, tid, rid, "interrupted", timeout=15)
    assert run["error"]
    events = await join(http, tid, rid)
    assert events[-1].event == "end" and events[-1].data["status"] == "interrupted"
    assert tool_finished(events) == 0
    assert (await http.get(f"/threads/{tid}")).json()["status"] == "idle"


async def test_on_disconnect_continue_is_the_default(
    http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(3, 0.3), "stream_mode": MODES}
    async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
        rid = response.headers["content-location"].rsplit("/", 1)[-1]
        seen = await read_events(response, stop=lambda evs: evs[-1].event == "metadata")
    assert [e.event for e in seen] == ["metadata"]
    joined = await http.get(f"/threads/{tid}/runs/{rid}/join", timeout=60)
    assert joined.status_code == 200
    assert joined.json()["status"] == "verified"
    assert (await http.get(f"/threads/{tid}/runs/{rid}")).json()["status"] == "success"
    assert sorted(counter_lines(server.data_dir, tid)) == ["1", "2", "3"]
