"""The worker pool in-process: leases and claims racing each other."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from api.contract.runs import RunCreate
from api.engine.worker import Workers
from api.lifecycle import open_service
from api.store import runs as runs_store
from api.store import threads as threads_store
from tests.utils.tasks import counter


async def test_run_claimed_while_a_lease_renewal_is_in_flight_is_not_taken_for_lost(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renewal's result lists the runs held when it ran; a run claimed while it was in flight
    is missing from it, and must not be stopped as "lost" (it would stall until its lease
    expired and run again as attempt 2)."""
    real_renew = runs_store.renew

    async def slow_renew(conn: Any, worker_id: str, lease: float, run_ids: list[str]) -> Any:
        held = await real_renew(conn, worker_id, lease, run_ids)
        await asyncio.sleep(0.4)  # claims land while this renewal is "in flight"
        return held

    monkeypatch.setattr(runs_store, "renew", slow_renew)
    async with open_service(settings, runtime=runtime) as svc:
        # A long run keeps the heartbeat renewing; short runs are claimed meanwhile.
        created = [
            await svc.create_run(
                str(uuid.uuid4()),
                RunCreate(assistant_id="agent", input=counter(2, 1.5), if_not_exists="create"),
            )
        ]
        for _ in range(8):
            await asyncio.sleep(0.15)
            created.append(
                await svc.create_run(
                    str(uuid.uuid4()),
                    RunCreate(assistant_id="agent", input=counter(1, 0.3), if_not_exists="create"),
                )
            )
        deadline = time.monotonic() + 60
        ended: list[dict[str, Any]] = []
        while len(ended) < len(created):
            assert time.monotonic() < deadline, "runs did not end"
            await asyncio.sleep(0.2)
            ended = [
                r
                for r in [await svc.refreshed_run(c["thread_id"], c["run_id"]) for c in created]
                if r["status"] not in ("pending", "running")
            ]
    assert [r["status"] for r in ended] == ["success"] * len(created)
    # Every run finished in its first attempt: none was stopped and taken over.
    assert [r["attempt"] for r in ended] == [1] * len(created)


async def test_result_streamed_but_not_checkpointed_is_not_sent_again_by_the_takeover(
    runtime: Any, settings: Any
) -> None:
    """The process dies after a tool call's update was stored as an event but before LangGraph
    saved the call's writes (it streams the update while the save is in flight). The takeover
    re-runs the call, which returns its recorded result without executing; that update is the
    one the client already has, so it is not stored again."""
    saver = runtime.saver
    real_put_writes = saver.aput_writes
    stalled = asyncio.Event()

    async def dies_saving_a_tool_result(
        config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        has_result = any(
            isinstance(m, ToolMessage)
            for channel, value in writes
            if channel == "messages"
            for m in (value if isinstance(value, list) else [value])
        )
        if has_result and not stalled.is_set():
            stalled.set()
            await asyncio.Event().wait()  # the process is gone: this save never lands
        await real_put_writes(config, writes, task_id, task_path)

    saver.aput_writes = dies_saving_a_tool_result
    async with open_service(settings, runtime=runtime, workers=False) as svc:
        first = Workers(runtime=runtime, hub=svc.hub)
        second = Workers(runtime=runtime, hub=svc.hub)
        try:
            await first.start()
            run = await svc.create_run(
                str(uuid.uuid4()),
                RunCreate(assistant_id="agent", input=counter(2, 0.0), if_not_exists="create"),
            )
            await asyncio.wait_for(stalled.wait(), timeout=30)
            # LangGraph streams the update while the save is in flight: the client gets it.
            deadline = time.monotonic() + 10
            while not (stored_before := await tool_result_events(runtime, run["run_id"])):
                assert time.monotonic() < deadline, "the result was not streamed"
                await asyncio.sleep(0.05)
            assert len(stored_before) == 1
            # The first worker dies: no more heartbeats; its lease runs out and the second takes
            # over.
            for loop in first._loops:
                loop.cancel()
            # Ended before the takeover: a claim the first had in flight, run by the server after
            # the second's start-up sweep expired the lease, would take the run as attempt 2 (and
            # hand it back), and the second would run attempt 3.
            await asyncio.gather(*first._loops, return_exceptions=True)
            await second.start()
            deadline = time.monotonic() + 60
            while (await svc.refreshed_run(run["thread_id"], run["run_id"]))["status"] in (
                "pending",
                "running",
            ):
                assert time.monotonic() < deadline, "the run was not taken over and finished"
                await asyncio.sleep(0.2)
            ended = await svc.refreshed_run(run["thread_id"], run["run_id"])
        finally:
            for execution in list(first.active.values()):
                if execution.task:
                    execution.task.cancel()
            await second.stop()
            saver.aput_writes = real_put_writes
        assert (ended["status"], ended["attempt"]) == ("success", 2)
        results = await tool_result_events(runtime, run["run_id"])
        call_ids = [r["tool_call_id"] for r in results]
        assert sorted(call_ids) == sorted(set(call_ids)), f"a result was sent twice: {call_ids}"
        assert len(call_ids) == 2  # counter n=2: two appends, each result stored once
        assert stored_before[0] in results


async def tool_result_events(runtime: Any, run_id: str) -> list[dict[str, Any]]:
    """The tool results among the run's stored ``updates`` events, in order."""
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT data FROM run_events WHERE run_id = %s AND event = 'updates' ORDER BY seq",
            (uuid.UUID(run_id),),
        )
        rows = await cur.fetchall()
    return [
        message
        for row in rows
        for message in (row["data"].get("tools") or {}).get("messages", [])
        if message.get("type") == "tool"
    ]


async def test_runs_a_claim_took_while_its_loop_was_stopped_are_handed_back(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim statement in flight when the claim loop is cancelled (shutdown) still runs: psycopg
    waits for it after sending the cancel. The runs it took must be handed back, not left held by
    a worker that will never execute them (they would wait for their lease, and that attempt
    would count as one that stalled)."""
    real_claim = runs_store.claim
    entered, gate, done = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def completes_whatever_happens(
        conn: Any, worker_id: str, lease: float, limit: int = 1, **kwargs: Any
    ) -> Any:
        async def statement() -> Any:
            entered.set()
            await gate.wait()
            try:
                return await real_claim(conn, worker_id, lease, limit, **kwargs)
            finally:
                done.set()

        # Like psycopg's wait for a statement after a cancel: it completes all the same.
        return await asyncio.shield(statement())

    async with open_service(settings, runtime=runtime, workers=False) as svc:
        workers = Workers(runtime=runtime, hub=svc.hub)
        try:
            run = await svc.create_run(
                str(uuid.uuid4()),
                RunCreate(assistant_id="agent", input=counter(1, 0.0), if_not_exists="create"),
            )
            monkeypatch.setattr(runs_store, "claim", completes_whatever_happens)
            await workers.start()
            await asyncio.wait_for(entered.wait(), 10)
            stopping = asyncio.create_task(workers.stop())
            await asyncio.sleep(0.2)  # the claim loop is cancelled while its statement runs
            gate.set()
            await asyncio.wait_for(stopping, 30)
            await asyncio.wait_for(done.wait(), 10)
            async with runtime.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT status, attempt, handbacks, worker_id FROM runs WHERE run_id = %s",
                    (uuid.UUID(run["run_id"]),),
                )
                row = await cur.fetchone()
        finally:
            gate.set()
        assert row is not None
        # Claimed (attempt 1), then handed back: the next worker claims it at once.
        assert dict(row) == {"status": "pending", "attempt": 1, "handbacks": 1, "worker_id": None}


async def test_waiting_for_a_run_that_a_rollback_removed_ends_with_not_found(
    runtime: Any, settings: Any
) -> None:
    """A join (or /wait) that began before a rollback removed its run must not wait forever
    for an ``end`` that went with the run."""
    from api.engine.rollback import roll_back
    from api.platform.errors import NotFound

    async with open_service(settings, runtime=runtime, workers=False) as svc:
        run = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=counter(1, 0.0), if_not_exists="create"),
        )
        await svc.cancel(run["thread_id"], run["run_id"])  # never claimed: ended at once
        await roll_back(runtime.pool, run["thread_id"], [run["run_id"]])
        with pytest.raises(NotFound, match="rolled back"):
            await asyncio.wait_for(svc.wait_for_end(run["run_id"]), 10)


async def test_a_process_never_claims_again_a_run_it_still_executes(
    runtime: Any, settings: Any
) -> None:
    """A heartbeat that is late (a busy process) lets the lease of a run this process executes
    expire. Its own claim loop must not take the run over as a second attempt (the run would
    run twice side by side, the first stopped as "lost"); another process may."""
    tid = str(uuid.uuid4())
    async with runtime.pool.connection() as conn:
        await threads_store.create(conn, tid, {}, None)
        await runs_store.insert(
            conn,
            thread_id=tid,
            assistant_id="agent",
            kwargs={},
            metadata={},
            multitask_strategy="reject",
        )
        [(run, _)] = await runs_store.claim(conn, "me", 30.0)
        await conn.execute(  # the lease ran out while the run goes on here
            "UPDATE runs SET lease_until = now() - interval '1 second' WHERE run_id = %s",
            (uuid.UUID(run.run_id),),
        )
        mine = await runs_store.claim(conn, "me", 30.0, executing=[run.run_id])
        assert mine == []
        [(taken, _)] = await runs_store.claim(conn, "other", 30.0, executing=[])
    assert (taken.run_id, taken.attempt) == (run.run_id, 2)


async def _ended(svc: Any, run: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        now = await svc.refreshed_run(run["thread_id"], run["run_id"])
        if now["status"] not in ("pending", "running"):
            return dict(now)
        assert time.monotonic() < deadline, f"run {run['run_id']} did not end: {now}"
        await asyncio.sleep(0.05)


def _recording_claims(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids every claim statement of the test returns."""
    claimed: list[str] = []
    real = runs_store.claim

    async def claim(*args: Any, **kwargs: Any) -> Any:
        got = await real(*args, **kwargs)
        claimed.extend(run.run_id for run, _ in got)
        return got

    monkeypatch.setattr(runs_store, "claim", claim)
    return claimed


async def test_a_run_on_an_idle_thread_starts_in_the_process_that_creates_it(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Created where a worker slot is free, a run is committed as claimed (attempt 1, this
    process's worker, a lease) in its creating transaction and starts at once: no claim
    statement takes it. It is still answered as queued (``pending``, as LangGraph Server)."""
    claimed = _recording_claims(monkeypatch)
    async with open_service(settings, runtime=runtime) as svc:
        assert svc.workers is not None
        created = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=counter(2), if_not_exists="create"),
        )
        assert (created["status"], created["attempt"]) == ("pending", 0)
        async with runtime.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT attempt, worker_id, lease_until > now() AS leased, progress IS NOT NULL"
                " AS marked FROM runs WHERE run_id = %s",
                (uuid.UUID(created["run_id"]),),
            )
            row = await cur.fetchone()
        assert row is not None
        assert dict(row) == {
            "attempt": 1,
            "worker_id": svc.workers.worker_id,
            "leased": True,
            "marked": True,  # the attempts limit judges a later attempt against it
        }
        ended = await _ended(svc, created)
    assert (ended["status"], ended["attempt"]) == ("success", 1)
    assert created["run_id"] not in claimed


async def test_a_run_behind_another_or_without_a_free_slot_is_queued_and_claimed(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker slot. A second run on the busy thread waits in the queue (one run per thread);
    a run on another thread, while the slot is taken, too. Both are claimed once the slot is
    free, in order, each as attempt 1."""
    claimed = _recording_claims(monkeypatch)
    one_slot = settings.model_copy(update={"workers": 1})
    monkeypatch.setattr(runtime, "settings", one_slot)  # the workers read the runtime's
    async with open_service(one_slot, runtime=runtime) as svc:
        tid = str(uuid.uuid4())
        first = await svc.create_run(
            tid,
            RunCreate(assistant_id="agent", input=counter(3, delay=0.3), if_not_exists="create"),
        )
        behind = await svc.create_run(
            tid, RunCreate(assistant_id="agent", input=counter(1), multitask_strategy="enqueue")
        )
        elsewhere = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=counter(1), if_not_exists="create"),
        )
        for queued in (behind, elsewhere):
            now = await svc.refreshed_run(queued["thread_id"], queued["run_id"])
            assert (now["status"], now["attempt"]) == ("pending", 0), now
        results = [await _ended(svc, run) for run in (first, behind, elsewhere)]
    assert [(r["status"], r["attempt"]) for r in results] == [("success", 1)] * 3
    # (The first run may have been claimed too: a claim in flight holds the only slot.)
    assert {behind["run_id"], elsewhere["run_id"]} <= set(claimed)


async def test_a_run_finished_but_not_yet_cleaned_up_is_not_taken_for_lost(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A heartbeat that lands between a run's final transaction and the end of its task (under
    load, that is many awaits) finds the run no longer running. It was finished here, not taken
    over: it must not be stopped as "lost" (found at c=50 in the no-work benchmark)."""
    from api.engine.execution import Executor

    real_finish = Executor.finish

    async def slow_to_clean_up(self: Executor, *args: Any, **kwargs: Any) -> None:
        await real_finish(self, *args, **kwargs)
        await asyncio.sleep(3 * settings.heartbeat_seconds)  # renewals happen meanwhile

    monkeypatch.setattr(Executor, "finish", slow_to_clean_up)
    caplog.set_level(logging.WARNING, logger="api.engine.worker")
    async with open_service(settings, runtime=runtime) as svc:
        created = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=counter(1), if_not_exists="create"),
        )
        ended = await _ended(svc, created)
        deadline = time.monotonic() + 10
        assert svc.workers is not None
        while svc.workers.active:
            assert time.monotonic() < deadline, "the run's task did not end"
            await asyncio.sleep(0.1)
    assert (ended["status"], ended["attempt"]) == ("success", 1)
    assert not [r.getMessage() for r in caplog.records if "lease lost" in r.getMessage()]
