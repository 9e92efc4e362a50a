"""One run under kills: :func:`run_with_kills` starts a run, SIGKILLs the server at the moments
a :class:`~tests.utils.kill_plan.KillPlan` names (``counter.txt`` has k lines, the n-th matching
event was seen, t seconds passed), restarts it, and returns an
:class:`~tests.utils.kill_plan.Outcome`: final run status, thread, ``counter.txt``, every event
read.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

import httpx

from tests.utils.kill_plan import KillPlan, KillPoint, KillRecord, Outcome
from tests.utils.server import ServerProcess, api_headers
from tests.utils.sse import StreamFollower
from tests.utils.workspace import counter_lines

STREAM_MODES = ("updates", "custom")
"""The stream modes a run under kills streams: node updates and the agent's own events."""


async def _create_run(
    base: str,
    *,
    input: Any,
    assistant_id: str,
    stream_mode: Sequence[str],
    config: dict[str, Any] | None,
    thread_id: str | None,
) -> tuple[str, str]:
    async with httpx.AsyncClient(base_url=base, timeout=30.0, headers=api_headers()) as client:
        body: dict[str, Any] = {"metadata": {"harness": "kill"}}
        if thread_id:
            body["thread_id"] = thread_id
        response = await client.post("/threads", json=body)
        response.raise_for_status()
        tid = response.json()["thread_id"]
        response = await client.post(
            f"/threads/{tid}/runs",
            json={
                "assistant_id": assistant_id,
                "input": input,
                "stream_mode": list(stream_mode),
                "config": config or {},
            },
        )
        if response.status_code != 200:
            raise AssertionError(
                f"creating the run answered {response.status_code}: {response.text}"
            )
        return tid, response.json()["run_id"]


async def _get_json(targets: Sequence[ServerProcess], path: str) -> dict[str, Any]:
    for server in targets:
        if server.running:
            async with httpx.AsyncClient(
                base_url=server.url, timeout=30.0, headers=api_headers()
            ) as client:
                response = await client.get(path)
                response.raise_for_status()
                result: dict[str, Any] = response.json()
                return result
    raise RuntimeError("no server is running")


async def run_with_kills(
    servers: ServerProcess | Sequence[ServerProcess],
    input: Any,
    plan: KillPlan | None = None,
    *,
    assistant_id: str = "agent",
    stream_mode: Sequence[str] = STREAM_MODES,
    config: dict[str, Any] | None = None,
    thread_id: str | None = None,
    timeout: float = 120.0,
) -> Outcome:
    """Create a run on ``servers[0]``, follow its stream like a reconnecting client, SIGKILL
    servers at the plan's moments (restarting them unless a point says not to), and report.

    Never raises for what the service did (a timeout ends up in ``Outcome.error``); raises when
    the harness itself cannot work (no server answers, the run cannot be created).
    """
    group = [servers] if isinstance(servers, ServerProcess) else list(servers)
    plan = plan or KillPlan()
    started = time.monotonic()
    tid, rid = await _create_run(
        group[0].url,
        input=input,
        assistant_id=assistant_id,
        stream_mode=stream_mode,
        config=config,
        thread_id=thread_id,
    )
    data_dir = group[0].data_dir
    follower = StreamFollower(tid, rid)
    kills: list[KillRecord] = []

    def fires(point: KillPoint, phase_start: float) -> bool:
        if all(c is None for c in (point.counter_lines, point.event, point.after_seconds)):
            return True
        if point.counter_lines is not None and (
            len(counter_lines(data_dir, tid)) >= point.counter_lines
        ):
            return True
        if point.event is not None:
            seen = {e.id: e for e in follower.events}
            if sum(1 for e in seen.values() if point.event(e)) >= point.nth:
                return True
        return point.after_seconds is not None and (
            time.monotonic() - phase_start >= point.after_seconds
        )

    halted = False

    async def wait_for_moment(point: KillPoint, phase_start: float) -> bool:
        """True when the point fires; False when the stream ended (or the harness gave up)."""
        while not (follower.ended or halted):
            if fires(point, phase_start):
                return True
            follower.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(follower.changed.wait(), timeout=0.01)
        return False

    async def killer() -> None:
        phase_start = started
        for point in plan.points:
            if not await wait_for_moment(point, phase_start):
                return
            server = group[point.target]
            kills.append(
                KillRecord(
                    point=point.describe(),
                    at=round(time.monotonic() - started, 3),
                    events_seen=len(follower.events),
                    counter_lines=len(counter_lines(data_dir, tid)),
                    pid=server.pid,
                    server=server.name,
                )
            )
            server.kill()
            if point.restart:
                # Never cancelled half-way: the end of run_with_kills awaits it.
                await asyncio.sleep(point.restart_delay)
                await asyncio.to_thread(server.start)
            phase_start = time.monotonic()

    error: str | None = None
    kill_task = asyncio.create_task(killer(), name="harness-killer")
    follow_task = asyncio.create_task(follower.follow(group, timeout=timeout))
    try:
        # A killer that fails (a restart that does not come up) ends the wait too.
        await asyncio.wait({kill_task, follow_task}, return_when=asyncio.FIRST_EXCEPTION)
        if kill_task.done() and kill_task.exception() is not None:
            follow_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await follow_task
            failure = kill_task.exception()
            assert failure is not None
            raise failure
        await follow_task
    except TimeoutError:
        error = (
            f"no 'end' event within {timeout:.0f} s "
            f"(read {len(follower.events)} events, last id {follower.last_event_id})"
        )
    finally:
        halted = True
        if not kill_task.done():
            await kill_task  # at most the restart in progress
    run = await _get_json(group, f"/threads/{tid}/runs/{rid}")
    thread = await _get_json(group, f"/threads/{tid}")
    return Outcome(
        thread_id=tid,
        run_id=rid,
        status=run.get("status"),
        run=run,
        thread=thread,
        events=follower.events,
        counter=counter_lines(data_dir, tid),
        kills=kills,
        connections=follower.connections,
        elapsed=round(time.monotonic() - started, 3),
        error=error,
    )
