"""The attempts limit counts failures to progress, not attempts.

A run ends in error after ``THREADLINE_MAX_ATTEMPTS`` attempts in a row that saved no new
checkpoint (nor a write on the latest one); an attempt that saved something starts the count
again, and one handed back on SIGTERM is not judged. So a run killed any number of times while it
moves on ends ``success``, and one that kills its process at the same step every time ends in
``error`` after the limit, with a message that names the step.

- the claim's bookkeeping on the store (``runs.claim``/``runs.release``), step by step;
- a served graph whose third node SIGKILLs its own process, restarted each time it dies;
- the counter killed at every line, more times than the limit, with the default settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.platform.settings import Settings
from api.store import runs as runs_store
from api.store.claimed_run import ClaimedRun
from tests.utils.kill_plan import KillPlan, KillPoint
from tests.utils.kills import run_with_kills
from tests.utils.server import ServerProcess, ServerStartError
from tests.utils.sse import StreamFollower
from tests.utils.workspace import counter_lines

MAX_ATTEMPTS = Settings.model_fields["max_attempts"].default
"""The default limit: every test here runs with it."""
RUN_TIMEOUT = 120.0


# -- the claim's bookkeeping --------------------------------------------------------------------


async def test_a_claim_counts_the_attempts_before_it_that_saved_nothing(runtime: Any) -> None:
    thread = str(uuid.uuid4())
    worker = "host/1/test"

    async def claim() -> ClaimedRun:
        async with runtime.pool.connection() as conn:
            [(run, _seq)] = await runs_store.claim(conn, worker, 30.0)
        return run

    async def dies() -> None:
        """The attempt's process dies: its lease runs out."""
        async with runtime.pool.connection() as conn:
            await conn.execute(
                "UPDATE runs SET lease_until = now() - interval '1 second' WHERE thread_id = %s",
                (thread,),
            )

    async def saves(*, ns: str = "", write: bool = False) -> None:
        """The attempt saves a checkpoint (of a subgraph when ``ns``), or a write on the latest."""
        async with runtime.pool.connection() as conn:
            if write:
                await conn.execute(
                    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id,"
                    " task_id, idx, channel, blob)"
                    " SELECT thread_id, '', max(checkpoint_id), %s, 0, 'x', ''::bytea"
                    " FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''"
                    " GROUP BY thread_id",
                    (str(uuid.uuid4()), thread),
                )
            else:  # uuid1 ids are time-ordered, as LangGraph's uuid6 ones
                await conn.execute(
                    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint)"
                    " VALUES (%s, %s, %s, '{}')",
                    (thread, ns, f"{uuid.uuid1().time:020d}"),
                )

    async with runtime.pool.connection() as conn:
        await conn.execute("INSERT INTO threads (thread_id) VALUES (%s)", (thread,))
        await runs_store.insert(
            conn,
            thread_id=thread,
            assistant_id="agent",
            kwargs={},
            metadata={},
            multitask_strategy="reject",
        )
    seen: list[tuple[int, int]] = []

    async def next_attempt() -> None:
        run = await claim()
        seen.append((run.attempt, run.stalled_attempts))

    await next_attempt()  # 1: nothing to judge yet
    await dies()  # ... before it saved anything
    await next_attempt()  # 2: one stalled
    await saves()
    await dies()
    await next_attempt()  # 3: attempt 2 saved a checkpoint
    await dies()
    await next_attempt()  # 4
    await dies()
    await next_attempt()  # 5: two stalled in a row
    await saves(write=True)  # a task of the step finished (its write is saved)
    await dies()
    await next_attempt()  # 6: that counts
    await dies()
    await next_attempt()  # 7
    await saves(ns="child:1")  # a subgraph saved a step
    await dies()
    await next_attempt()  # 8: that counts too
    await dies()
    await next_attempt()  # 9: one stalled
    async with runtime.pool.connection() as conn:  # SIGTERM: handed back, twice
        await runs_store.release(conn, (await claim_id(runtime, thread)), 9, worker)
    await next_attempt()  # 10: not judged, the count stays
    async with runtime.pool.connection() as conn:
        await runs_store.release(conn, (await claim_id(runtime, thread)), 10, worker)
    await next_attempt()  # 11
    await saves()
    async with runtime.pool.connection() as conn:  # handed back after it saved: count reset
        await runs_store.release(conn, (await claim_id(runtime, thread)), 11, worker)
    await next_attempt()  # 12
    assert seen == [
        (1, 0),
        (2, 1),
        (3, 0),
        (4, 1),
        (5, 2),
        (6, 0),
        (7, 1),
        (8, 0),
        (9, 1),
        (10, 1),
        (11, 1),
        (12, 0),
    ]


async def claim_id(runtime: Any, thread: str) -> str:
    async with runtime.pool.connection() as conn:
        cur = await conn.execute("SELECT run_id FROM runs WHERE thread_id = %s", (thread,))
        row = await cur.fetchone()
    assert row is not None
    return str(row["run_id"])


# -- a run that kills its process at the same step every time ----------------------------------

CRASHING_GRAPH = textwrap.dedent(
    '''
    """Two steps that work, then one that kills the process running it, every time."""
    import os
    import signal
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph


    class State(TypedDict, total=False):
        done: list[str]


    def first(state: State) -> State:
        return {"done": [*state.get("done", []), "first"]}


    def second(state: State) -> State:
        return {"done": [*state.get("done", []), "second"]}


    def crash(state: State) -> State:
        os.kill(os.getpid(), signal.SIGKILL)  # what an out-of-memory kill looks like
        return state


    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_node("crash", crash)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", "crash")
    builder.add_edge("crash", END)
    '''
)


def crashing_config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "crashing.py").write_text(CRASHING_GRAPH)
    config = directory / "langgraph.json"
    config.write_text('{"graphs": {"crashing": "./crashing.py:builder"}}')
    return config


@pytest.mark.slow
async def test_a_run_that_kills_its_process_at_one_step_ends_in_error_naming_it(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """Each time its server dies it is restarted (as a supervisor would); the restart takes the
    run over at once. Attempt 1 saves the first two steps; attempts 2, 3 and 4 die in ``crash``
    without saving anything; the claim of attempt 5 ends the run."""
    server = make_server(database_url, tmp_path / "data", config=crashing_config(tmp_path / "p"))
    server.start()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        response = await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "crashing", "input": {"done": []}, "stream_mode": ["updates"]},
        )
        assert response.status_code == 200, response.text
        rid = response.json()["run_id"]
    follower = StreamFollower(tid, rid)

    async def supervise() -> None:
        while not follower.ended:
            if not server.running:
                # The takeover starts at once: the process may die before it answers /ok.
                with contextlib.suppress(ServerStartError):
                    await asyncio.to_thread(server.start)
            await asyncio.sleep(0.05)

    supervisor = asyncio.create_task(supervise())
    try:
        await follower.follow([server], timeout=RUN_TIMEOUT)
    finally:
        supervisor.cancel()
        await asyncio.gather(supervisor, return_exceptions=True)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        run = (await http.get(f"/threads/{tid}/runs/{rid}")).json()
        state = (await http.get(f"/threads/{tid}/state")).json()
    attempts = [e.data["attempt"] for e in follower.events if e.event == "metadata"]
    assert attempts == list(range(1, MAX_ATTEMPTS + 2)), attempts
    assert server.starts == MAX_ATTEMPTS + 2  # the first start, then one per death
    assert (run["status"], run["attempt"]) == ("error", MAX_ATTEMPTS + 2)
    [error] = [e.data for e in follower.events if e.event == "error"]
    assert error["error"] == "AttemptsExhausted"
    assert follower.events[-1].event == "end" and follower.events[-1].data["status"] == "error"
    message = run["error"]
    assert error["message"] == message
    assert f"its last {MAX_ATTEMPTS} attempts in a row saved no new checkpoint" in message
    # LangGraph's steps: the input (-1), __start__ (0), first (1), second (2), crash (3)
    assert "at step 3 of the graph, running 'crash'" in message, message
    assert "input is null" in message
    # The steps before it ran once: each later attempt went on from their checkpoint.
    assert state["values"] == {"done": ["first", "second"]}
    assert state["next"] == ["crash"]


# -- a run killed often while it moves on ------------------------------------------------------


@pytest.mark.slow
async def test_a_run_killed_at_every_line_more_often_than_the_limit_ends_verified(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """The counter SIGKILLed each time another line appears: each attempt moved it on, so none
    counts against the limit, however many there are."""
    n = 6
    server = make_server(database_url, tmp_path / "data", env={"THREADLINE_LOG_LEVEL": "warning"})
    server.start()
    plan = KillPlan([KillPoint(counter_lines=lines) for lines in range(1, n)])
    outcome = await run_with_kills(
        server,
        {"task": {"name": "counter", "params": {"n": n, "delay": 0.3}}},
        plan,
        timeout=RUN_TIMEOUT,
    )
    assert outcome.problems(counter_n=n) == []
    assert len(outcome.kills) == n - 1 > MAX_ATTEMPTS
    assert outcome.thread["values"]["status"] == "verified"
    # Lines 1, 2, 4 and 5 each need an attempt of their own (3 may come from a killed one's
    # orphaned call), and one more finishes: more attempts than the limit allows in a row.
    assert outcome.run["attempt"] >= 5 > MAX_ATTEMPTS, outcome.run
    assert sorted(counter_lines(server.data_dir, outcome.thread_id), key=int) == [
        str(i) for i in range(1, n + 1)
    ]
