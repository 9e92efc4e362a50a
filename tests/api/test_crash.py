"""Crash-safe runs: SIGKILL or SIGTERM a real server mid-run, and the run goes on.

After each kill the server is restarted on the same port, database and data directory; its
start-up sweep expires the leases the dead process held, so it takes the run over at once, as
attempt 2 of the **same run**, continuing from the run's last checkpoint. What must hold:

- the run ends ``success`` and the thread's values say ``verified``;
- ``counter.txt`` holds 1..n exactly once, and ``.counter-attempts`` shows each line applied
  once (a call re-run on the takeover because its result was not checkpointed is "skipped" by the
  idempotency ledger — those are counted and printed);
- a client that reconnects with ``Last-Event-ID`` reads every event once, ids 1..N without a gap,
  a ``metadata`` event with ``attempt: 2`` and exactly one ``end``.

Also: two processes on one database (the survivor takes over after the lease), a run whose
attempts ran out resumed on request with ``input: null``, and SIGTERM handing a run back.

Every module test shares one server (``server`` from ``tests/api/conftest.py``), which the tests
kill and restart; start-ups dominate the run time of this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from agent.tasks.counter import groups
from tests.api.conftest import FAST
from tests.utils.kill_plan import KillPlan, KillPoint, Outcome, is_custom, is_update_from
from tests.utils.kills import run_with_kills
from tests.utils.processes import processes_in
from tests.utils.runs import MODES, start_run, until
from tests.utils.server import ServerProcess, clean_environ
from tests.utils.sse import SSEEvent, StreamFollower, read_sse
from tests.utils.tasks import counter
from tests.utils.workspace import counter_lines, workspace_path

pytestmark = pytest.mark.slow

N = 4
"""Lines per run: steps 1 | 2 3 | 4, then a final agent step without calls, then verify."""
DELAY = 0.4
MAX_PARALLEL = max(len(g) for g in groups(N))
LEASE = FAST["lease_seconds"]
GRACE = 1.0
SERVER_ENV = {"THREADLINE_SHUTDOWN_GRACE_SECONDS": str(GRACE), "THREADLINE_LOG_LEVEL": "warning"}
"""For the module's ``server``: SIGTERM gives running runs one second, then hands them back."""
RUN_TIMEOUT = 90.0


# -- what the tests look at -------------------------------------------------------------------


def final_agent_step(ev: SSEEvent) -> bool:
    """The agent's last ``step_finished`` (no tool calls): ``verify`` runs next."""
    return (
        is_custom("step_finished")(ev)
        and isinstance(ev.data, dict)
        and ev.data.get("tool_calls") == []
    )


def is_metadata(ev: SSEEvent) -> bool:
    return ev.event == "metadata"


def is_attempt(attempt: int) -> Callable[[SSEEvent], bool]:
    """A predicate: the ``metadata`` event of ``attempt``."""

    def predicate(ev: SSEEvent) -> bool:
        return is_metadata(ev) and isinstance(ev.data, dict) and ev.data["attempt"] == attempt

    predicate.__name__ = f"metadata of attempt {attempt}"
    return predicate


final_agent_step.__name__ = "final step_finished"
is_metadata.__name__ = "metadata"


async def no_tools_left(data_dir: Path, thread_id: str, timeout: float = 10.0) -> None:
    """Orphaned appends of a killed server finish on their own (each takes DELAY): wait."""
    workspace = workspace_path(data_dir, thread_id)
    deadline = time.monotonic() + timeout
    while processes_in(workspace):
        assert time.monotonic() < deadline, f"tool processes still running in {workspace}"
        await asyncio.sleep(0.05)


def appends(data_dir: Path, thread_id: str, n: int) -> int:
    """Each line applied exactly once per ``.counter-attempts``; returns the skipped executions."""
    log = workspace_path(data_dir, thread_id, ".counter-attempts").read_text().splitlines()
    rows = [line.split() for line in log if line.strip()]
    applied = Counter(line for _key, outcome, line in rows if outcome == "applied")
    assert applied == Counter(str(i) for i in range(1, n + 1)), rows
    skipped = [row for row in rows if row[1] == "skipped"]
    applied_keys = {key for key, outcome, _line in rows if outcome == "applied"}
    # A skipped execution is a re-run of a call that did apply: the same idempotency key.
    assert {key for key, _outcome, _line in skipped} <= applied_keys, rows
    return len(skipped)


def assert_resumed_once(outcome: Outcome, n: int = N, attempts: list[int] | None = None) -> None:
    """The run's contract after a kill (see the module docstring)."""
    assert outcome.problems(counter_n=n) == [], outcome.problems(counter_n=n)
    events = outcome.events
    ids = [e.seq for e in events]
    assert ids == list(range(1, len(events) + 1)), ids
    assert [e.event for e in events].count("end") == 1
    assert events[-1].event == "end" and events[-1].data["status"] == "success"
    assert outcome.attempts == (attempts or [1, 2]), outcome.attempts
    assert outcome.run["attempt"] == (attempts or [1, 2])[-1]
    assert outcome.thread["values"]["status"] == "verified"
    assert outcome.thread["status"] == "idle"
    assert sorted(outcome.counter, key=int) == [str(i) for i in range(1, n + 1)]
    assert outcome.connections >= 2, "the client never had to reconnect: the kill came too late"
    # Every call's result reached the stream: once, or once per execution when it ran again.
    updates = [e.data for e in events if e.event == "updates"]
    calls, results = set(tool_calls(updates)), tool_results(updates)
    started = Counter(e.data["tool_call_id"] for e in events if is_custom("tool_started")(e))
    assert len(calls) == n, calls
    assert all(1 <= results[c] <= max(started[c], 1) for c in calls), (results, started)


async def db_run(database_url: str, run_id: str) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        cur = await conn.execute(
            "SELECT status, attempt, worker_id, lease_until FROM runs WHERE run_id = %s",
            (uuid.UUID(run_id),),
        )
        row = await cur.fetchone()
        assert row is not None
        return dict(row)


@contextlib.asynccontextmanager
async def following(
    follower: StreamFollower, targets: list[ServerProcess]
) -> AsyncIterator[asyncio.Task[list[SSEEvent]]]:
    task = asyncio.create_task(follower.follow(targets, timeout=RUN_TIMEOUT))
    try:
        yield task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await task


@pytest.fixture(autouse=True)
def live(server: ServerProcess) -> Iterator[None]:
    """The module's server is up when a test starts (a test before may have left it dead)."""
    if not server.running:
        server.start()
    yield


# -- SIGKILL at chosen moments, restart ---------------------------------------------------------

KILL_POINTS = {
    # Early in step 1. A kill lands "at or after" its event: the graph runs on while the event
    # travels to the client, so this one often hits the first call in flight; the kill before
    # any tool is ``test_sigkill_before_the_first_tool`` below.
    "first-agent-step": KillPoint(event=is_custom("step")),
    # Between steps: line 1's result is saved, step 2 has not started.
    "after-tools-update": KillPoint(event=is_update_from("tools")),
    # Inside step 2, whose two calls append lines 2 and 3 in parallel: right after the first
    # of them started, and when the first of them finished (the other still running).
    "step2-first-tool-started": KillPoint(event=is_custom("tool_started"), nth=2),
    "step2-one-call-finished": KillPoint(event=is_custom("tool_finished"), nth=2),
    # The agent's final answer (no calls) is out: verify runs next.
    "before-verify": KillPoint(event=final_agent_step),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
async def test_sigkill_then_restart_resumes_the_same_run(server: ServerProcess, point: str) -> None:
    assert groups(N) == [[1], [2, 3], [4]]  # what the kill points above rely on
    plan = KillPlan([KILL_POINTS[point]])
    outcome = await run_with_kills(server, counter(N, DELAY), plan, timeout=RUN_TIMEOUT)
    assert len(outcome.kills) == 1, "the run ended before the kill point was reached"
    await no_tools_left(server.data_dir, outcome.thread_id)
    assert_resumed_once(outcome)
    # Attempt 2's events come after everything attempt 1 stored: its metadata is the first one
    # the restarted server wrote, and the kill happened after at least that many events.
    second = next(
        i for i, e in enumerate(outcome.events) if is_metadata(e) and e.data["attempt"] == 2
    )
    assert second >= outcome.kills[0].events_seen
    skipped = appends(server.data_dir, outcome.thread_id, N)
    # Only calls in flight at the kill run again (their appends outlived the server and the
    # re-runs were skipped), and a step of the counter has at most MAX_PARALLEL of them. The
    # kill lands "at or after" its event: the graph runs on while the event travels to the client.
    assert skipped <= MAX_PARALLEL
    last = outcome.events[outcome.kills[0].events_seen - 1]
    kind = last.data.get("type", "") if isinstance(last.data, dict) else ""
    print(
        f"\n[crash] {point}: killed after {outcome.kills[0].events_seen} events "
        f"(last: {last.event} {kind}) / "
        f"{outcome.kills[0].counter_lines} line(s); {len(outcome.events)} events, "
        f"{outcome.connections} connections, {skipped} append(s) skipped, {outcome.elapsed:.1f} s"
    )


def kill_when_stored(server: ServerProcess, database_url: str, run_id: str, event: str) -> float:
    """SIGKILL ``server`` as soon as the run has stored ``event``: polls the event table (about a
    millisecond a query) instead of waiting for the event to reach a client. Returns the time."""
    deadline = time.monotonic() + 30
    with psycopg.connect(database_url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT 1 FROM run_events WHERE run_id = %s AND event = %s",
            (uuid.UUID(run_id), event),
        ).fetchone():
            assert time.monotonic() < deadline, f"no {event!r} event stored within 30 s"
    server.kill()
    return time.monotonic()


async def test_sigkill_before_the_first_tool(
    server: ServerProcess, module_database_url: str
) -> None:
    """Killed right after the worker stored ``metadata``: attempt 1 started the graph (perhaps
    without checkpointing the input yet) but no tool; attempt 2 runs it from there.

    The client creates the run with ``POST .../runs/stream`` (connected from the start), and
    after the drop joins the run's stream with ``Last-Event-ID``."""
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        body = {"assistant_id": "agent", "input": counter(N, DELAY), "stream_mode": MODES}
        first: list[SSEEvent] = []
        async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
            assert response.status_code == 200
            rid = response.headers["Content-Location"].rsplit("/", 1)[1]
            killing = asyncio.create_task(
                asyncio.to_thread(kill_when_stored, server, module_database_url, rid, "metadata")
            )
            with contextlib.suppress(httpx.TransportError):
                async for frame in read_sse(response):
                    if not frame.is_comment:
                        first.append(frame)
        await asyncio.wait_for(killing, 30)
    lines_at_kill = len(counter_lines(server.data_dir, tid))
    assert not any(e.event == "end" for e in first)
    await asyncio.to_thread(server.start)
    follower = StreamFollower(tid, rid, last_event_id=first[-1].seq if first else None)
    await follower.follow([server], timeout=RUN_TIMEOUT)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        run = (await http.get(f"/threads/{tid}/runs/{rid}")).json()
        thread = (await http.get(f"/threads/{tid}")).json()
    await no_tools_left(server.data_dir, tid)
    outcome = Outcome(
        thread_id=tid,
        run_id=rid,
        status=run["status"],
        run=run,
        thread=thread,
        events=first + follower.events,
        counter=counter_lines(server.data_dir, tid),
        kills=[],
        connections=1 + follower.connections,
        elapsed=round(time.monotonic() - started, 3),
    )
    assert_resumed_once(outcome)
    # The kill came before any tool: attempt 1 stored no tool event and no append ran twice.
    async with await psycopg.AsyncConnection.connect(module_database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT data->>'type' FROM run_events WHERE run_id = %s AND attempt = 1",
            (uuid.UUID(rid),),
        )
        first_attempt = [row[0] for row in await cur.fetchall()]
    assert lines_at_kill == 0
    assert "tool_started" not in first_attempt, first_attempt
    assert appends(server.data_dir, tid, N) == 0
    print(
        f"\n[crash] before-first-tool: attempt 1 stored {len(first_attempt)} event(s); "
        f"the first connection read {len(first)}; {len(outcome.events)} events, 0 appends skipped"
    )


# -- two processes, one database ------------------------------------------------------------


async def test_survivor_takes_over_the_killed_processs_run(
    server: ServerProcess,
    module_database_url: str,
    make_server: Callable[..., ServerProcess],
) -> None:
    other = make_server(module_database_url, server.data_dir, name="other")
    other.start()
    tid, rid = await start_run(
        server, {"assistant_id": "agent", "input": counter(N, DELAY), "stream_mode": MODES}
    )
    follower = StreamFollower(tid, rid)
    async with following(follower, [server, other]) as reading:
        await until(
            follower, lambda: any(is_custom("tool_started")(e) for e in follower.events), 30
        )
        holder = await db_run(module_database_url, rid)
        assert holder["status"] == "running" and holder["attempt"] == 1
        pid = int(holder["worker_id"].split("/")[1])
        victim, survivor = (server, other) if pid == server.pid else (other, server)
        assert victim.pid == pid, (holder, server.pid, other.pid)
        victim.kill()  # not restarted: only the survivor can finish the run
        killed_at = time.monotonic()

        def attempt_2() -> bool:
            return any(is_metadata(e) and e.data["attempt"] == 2 for e in follower.events)

        await until(follower, attempt_2, LEASE + 10)
        takeover = time.monotonic() - killed_at
        await asyncio.wait_for(reading, LEASE + 10)
        finished = time.monotonic() - killed_at
    assert takeover >= LEASE - 1.0, f"taken over {takeover:.1f} s after the kill, before the lease"
    assert finished <= LEASE + 10, f"finished {finished:.1f} s after the kill"
    run = await db_run(module_database_url, rid)
    assert run["status"] == "success" and run["attempt"] == 2
    assert int(run["worker_id"].split("/")[1]) == survivor.pid
    async with httpx.AsyncClient(base_url=survivor.url, timeout=30) as http:
        thread = (await http.get(f"/threads/{tid}")).json()
    events = follower.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.data["attempt"] for e in events if is_metadata(e)] == [1, 2]
    assert [e.event for e in events].count("end") == 1 and events[-1].data["status"] == "success"
    assert thread["values"]["status"] == "verified"
    await no_tools_left(server.data_dir, tid)
    assert sorted(counter_lines(server.data_dir, tid), key=int) == ["1", "2", "3", "4"]
    skipped = appends(server.data_dir, tid, N)
    print(
        f"\n[crash] two processes: killed {victim.name}; {survivor.name} resumed after "
        f"{takeover:.2f} s and finished after {finished:.2f} s (lease {LEASE:.0f} s); "
        f"{skipped} append(s) skipped"
    )


# -- attempts exhausted, resumed on request ---------------------------------------------------


async def cli_resume(server: ServerProcess, database_url: str, thread_id: str) -> str:
    """``threadline resume THREAD_ID`` with a server up at ``THREADLINE_URL``: its output."""
    env = {
        **clean_environ(),
        "DATABASE_URL": database_url,
        "THREADLINE_DATA_DIR": str(server.data_dir),
        "THREADLINE_URL": server.url,
        "PYTHONUNBUFFERED": "1",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli",
        "resume",
        thread_id,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text
    return text


@pytest.mark.parametrize("via", ["api", "cli"])
async def test_run_out_of_attempts_is_resumed_on_request(
    server: ServerProcess, module_database_url: str, via: str
) -> None:
    """Resumed by thread id on request: ``POST /threads/{id}/runs`` with ``input: null``, or
    ``threadline resume ID``, which goes through the running server.

    One attempt without progress is the limit here. Attempt 1 is killed in step 2 (it saved
    steps before: progress), attempt 2 as soon as it starts, while it runs the calls of step 2
    again (each takes ``delay``): it saved nothing, so the run ends at its next claim."""
    server.env["THREADLINE_MAX_ATTEMPTS"] = "1"  # read by the restarts below
    delay = 1.5  # far longer than a kill takes to land once attempt 2's metadata is read
    try:
        plan = KillPlan(
            [
                KillPoint(event=is_custom("tool_started"), nth=2, label="step 2 started"),
                KillPoint(event=is_attempt(2), label="attempt 2 started"),
            ]
        )
        died = await run_with_kills(server, counter(N, delay), plan, timeout=RUN_TIMEOUT)
    finally:
        del server.env["THREADLINE_MAX_ATTEMPTS"]  # the next start allows 3 again
    assert len(died.kills) == 2
    assert died.problems(expect_status="error") == []
    assert died.attempts == [1, 2]  # attempt 3 started nothing: it ended the run at once
    errors = [e for e in died.events if e.event == "error"]
    assert len(errors) == 1 and errors[0].data["error"] == "AttemptsExhausted"
    assert died.end is not None and died.end.data["status"] == "error"
    message = died.run["error"]
    assert "its last attempt saved no new checkpoint" in message, message
    assert "died or stopped renewing its lease" in message
    # ... names where it kept dying: the two calls of step 2 (the graph's step 4: input, agent,
    # tools, agent), and says how to go on.
    assert "at step 4 of the graph, running 'tools' (2 tasks)" in message, message
    assert "input is null" in message
    assert died.run["attempt"] == 3
    # The thread says so, with the run and its error.
    assert died.thread["status"] == "error"
    assert died.thread["last_run"]["run_id"] == died.run_id
    assert died.thread["last_run"]["status"] == "error"
    assert died.thread["last_run"]["error"] == message
    await no_tools_left(server.data_dir, died.thread_id)
    assert len(counter_lines(server.data_dir, died.thread_id)) < N

    # Resume on request: a new run with input null continues from the last checkpoint.
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        if via == "api":
            response = await http.post(
                f"/threads/{died.thread_id}/runs",
                json={"assistant_id": "agent", "input": None, "stream_mode": MODES},
            )
            assert response.status_code == 200, response.text
            rid = response.json()["run_id"]
        else:
            output = await cli_resume(server, module_database_url, died.thread_id)
            assert f"through the server at {server.url}" in output, output
            assert "status: verified" in output and f"counter.txt holds 1..{N}" in output
            listed = (await http.get(f"/threads/{died.thread_id}/runs")).json()
            assert len(listed) == 2, listed
            rid = listed[0]["run_id"]
        assert rid != died.run_id
        events = await StreamFollower(died.thread_id, rid).follow([server], timeout=RUN_TIMEOUT)
        run = (await http.get(f"/threads/{died.thread_id}/runs/{rid}")).json()
        thread = (await http.get(f"/threads/{died.thread_id}")).json()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].data == {"run_id": rid, "attempt": 1}
    assert events[-1].event == "end" and events[-1].data["status"] == "success"
    assert run["status"] == "success"
    assert thread["status"] == "idle" and thread["values"]["status"] == "verified"
    assert thread["last_run"]["run_id"] == rid
    # From the checkpoint, not from scratch: step 1 (line 1) is not run again.
    steps = [e.data["step"] for e in events if is_custom("step")(e)]
    assert steps and steps[0] >= 2, steps
    lines = counter_lines(server.data_dir, died.thread_id)
    assert sorted(lines, key=int) == ["1", "2", "3", "4"]
    skipped = appends(server.data_dir, died.thread_id, N)
    print(f"\n[crash] attempts exhausted, resumed via {via}: {skipped} append(s) skipped")


# -- SIGTERM: stop claiming, grace period, hand back -----------------------------------------


async def test_sigterm_hands_the_run_back(server: ServerProcess, module_database_url: str) -> None:
    n, delay = 5, 1.0  # ~8 s of work: more than the shutdown takes
    tid, rid = await start_run(
        server, {"assistant_id": "agent", "input": counter(n, delay), "stream_mode": MODES}
    )
    follower = StreamFollower(tid, rid)
    async with following(follower, [server]) as reading:
        await until(
            follower, lambda: any(is_custom("tool_started")(e) for e in follower.events), 30
        )
        started = time.monotonic()
        code = await asyncio.to_thread(server.terminate, GRACE + 15)
        took = time.monotonic() - started
        # uvicorn closes connections (up to 3 s for open streams), then the grace period, then
        # the hand-back: well under GRACE + a few seconds.
        assert took <= GRACE + 6, f"SIGTERM took {took:.1f} s"
        # uvicorn re-raises the signal once it has shut down: -SIGTERM is its clean exit.
        assert code in (0, -signal.SIGTERM), server.log_tail()
        handed_back = await db_run(module_database_url, rid)
        assert not follower.ended
        # Handed back, not left to expire: pending at once, held by nobody.
        assert handed_back["status"] == "pending", handed_back
        assert handed_back["worker_id"] is None and handed_back["attempt"] == 1
        restarted = time.monotonic()
        await asyncio.to_thread(server.start)
        await asyncio.wait_for(reading, RUN_TIMEOUT)
    events = follower.events
    second = next(e for e in events if is_metadata(e) and e.data["attempt"] == 2)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.data["attempt"] for e in events if is_metadata(e)] == [1, 2]
    assert [e.event for e in events].count("end") == 1 and events[-1].data["status"] == "success"
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        thread = (await http.get(f"/threads/{tid}")).json()
    assert thread["values"]["status"] == "verified"
    await no_tools_left(server.data_dir, tid)
    assert sorted(counter_lines(server.data_dir, tid), key=int) == [str(i) for i in range(1, n + 1)]
    skipped = appends(server.data_dir, tid, n)
    print(
        f"\n[crash] SIGTERM: exited after {took:.2f} s (grace {GRACE:.0f} s), handed back; "
        f"restart + resume {time.monotonic() - restarted:.1f} s, metadata #{second.seq}; "
        f"{skipped} append(s) skipped"
    )


# -- an update the dead attempt never stored -------------------------------------------------


def tool_results(updates: list[Any]) -> Counter[str]:
    """tool_call_id → how many ``updates`` events carry its ToolMessage."""
    found: Counter[str] = Counter()
    for data in updates:
        for node_update in data.values():
            if isinstance(node_update, dict):
                for message in node_update.get("messages") or []:
                    if isinstance(message, dict) and message.get("type") == "tool":
                        found[message["tool_call_id"]] += 1
    return found


def tool_calls(updates: list[Any]) -> list[str]:
    return [
        call["id"]
        for data in updates
        for node_update in data.values()
        if isinstance(node_update, dict)
        for message in node_update.get("messages") or []
        if isinstance(message, dict) and message.get("type") == "ai"
        for call in message.get("tool_calls") or []
    ]


async def test_update_of_a_call_finished_before_the_crash_is_sent_once(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 1 dies after both calls of step 2 finished (their results are saved as pending
    writes) but when it had stored the ``tools`` update of only one of them. Attempt 2 does not
    run them again; LangGraph re-emits both updates as cached, and the client must get each
    exactly once: not twice (the one attempt 1 stored), not never (the one it did not).

    In-process, to hit that window every time: worker A hangs on storing the second ``tools``
    update of step 2 and stops renewing its lease (a hung process); worker B takes the run over.
    """
    from api.contract.runs import RunCreate
    from api.durable.event_writer import Emitter
    from api.engine.worker import Workers
    from api.lifecycle import open_service

    frozen = asyncio.Event()
    real_emit = Emitter.emit
    step_2: list[str] = []

    async def emit(self: Emitter, event: str, data: Any) -> None:
        if self.attempt == 1 and event == "updates" and isinstance(data, dict) and "tools" in data:
            messages = data["tools"].get("messages") or []
            step_2.extend(m.tool_call_id for m in messages if m.tool_call_id != "call_2_0")
            if len(step_2) == 2:  # the second call of step 2: the first one's update is stored
                frozen.set()
                await asyncio.Event().wait()  # hung until cancelled
        await real_emit(self, event, data)

    monkeypatch.setattr(Emitter, "emit", emit)
    async with open_service(settings, runtime=runtime, workers=False) as svc:
        a = Workers(runtime=runtime, hub=svc.hub)
        b = Workers(runtime=runtime, hub=svc.hub)
        try:
            tid = str(uuid.uuid4())
            run = await svc.create_run(
                tid,
                RunCreate(
                    assistant_id="agent",
                    input=counter(N, 0.2),
                    stream_mode=MODES,
                    if_not_exists="create",
                ),
            )
            rid = run["run_id"]
            await a.start()
            await asyncio.wait_for(frozen.wait(), 30)
            await asyncio.sleep(0.5)  # the other call of step 2 finishes and saves its result too
            for loop in a._loops:  # A hangs: no more heartbeats or claims
                loop.cancel()
            # Ended before A's lease is expired: a claim A had in flight could otherwise run on the
            # server after the expiry and take the run as attempt 2 (handed back at once, since
            # its loop is cancelled), and B would run attempt 3.
            await asyncio.gather(*a._loops, return_exceptions=True)
            async with runtime.pool.connection() as conn:
                await conn.execute(
                    "UPDATE runs SET lease_until = now() - interval '1 second' WHERE run_id = %s",
                    (uuid.UUID(rid),),
                )
            await b.start()
            deadline = time.monotonic() + 60
            while (await svc.refreshed_run(tid, rid))["status"] in ("pending", "running"):
                assert time.monotonic() < deadline, "the run did not end on worker B"
                await asyncio.sleep(0.1)
            async with runtime.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT seq, event, attempt, data::text AS data FROM run_events"
                    " WHERE run_id = %s ORDER BY seq",
                    (uuid.UUID(rid),),
                )
                stored = list(await cur.fetchall())
        finally:
            for task in [e.task for e in a.active.values() if e.task]:
                task.cancel()
            await asyncio.gather(
                *(e.task for e in a.active.values() if e.task), return_exceptions=True
            )
            await b.stop()
            await a.stop()
    ended = await svc.refreshed_run(tid, rid)
    # Which attempt stored what, to tell how a run that ended on another attempt got there.
    trail = [
        (row["seq"], row["event"], row["attempt"])
        for row in stored
        if row["event"] in ("metadata", "end", "error")
    ]
    assert (ended["status"], ended["attempt"]) == ("success", 2), (ended, trail)
    assert [row["seq"] for row in stored] == list(range(1, len(stored) + 1))
    updates = [json.loads(row["data"]) for row in stored if row["event"] == "updates"]
    calls = tool_calls(updates)
    assert len(calls) == N
    # Each call's result reached the stream exactly once (no call ran twice here: none was
    # in flight when A hung).
    assert tool_results(updates) == Counter(calls), tool_results(updates)
    # The one attempt 1 stored was not sent again; the other one attempt 2 sent.
    by_call = {
        call: row["attempt"]
        for row in stored
        if row["event"] == "updates"
        for call in tool_results([json.loads(row["data"])])
    }
    assert [by_call[call] for call in step_2] == [1, 2], (step_2, by_call)
    assert sorted(counter_lines(settings.data_dir, tid), key=int) == ["1", "2", "3", "4"]
