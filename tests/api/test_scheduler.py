"""The scheduler's pass (``api.runs.scheduler.fire_due``) on a real database, without HTTP: a
thread-bound schedule on a busy thread queues (``enqueue``) or skips (``reject``) the due time;
one that missed several due times fires once and moves to the next one after now; one past its
``end_time`` has no due time left; a disabled one does not fire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from api.engine.runtime import Runtime
from api.runs.scheduler import fire_due
from api.store import crons, runs, threads


async def _cron(rt: Runtime, **values: Any) -> str:
    row = {
        "assistant_id": "agent",
        "thread_id": None,
        "schedule": "*/5 * * * *",
        "timezone": None,
        "payload": {},
        "kwargs": {"input": None, "config": {}, "stream_mode": ["values"]},
        "metadata": {"k": "v"},
        "multitask_strategy": "enqueue",
        "on_run_completed": "keep",
        "owner": "ada",
        "user_id": "ada",
        "enabled": True,
        "end_time": None,
        "next_run_at": datetime.now(UTC) - timedelta(minutes=17),
        **values,
    }
    async with rt.pool.connection() as conn:
        return str((await crons.insert(conn, **row))["cron_id"])


async def _row(rt: Runtime, cron_id: str) -> Any:
    async with rt.pool.connection() as conn:
        return await crons.get(conn, cron_id, None)


async def _busy_thread(rt: Runtime, thread_id: str) -> None:
    async with rt.pool.connection() as conn, conn.transaction():
        await threads.create(conn, thread_id, {}, "ada")
        await runs.insert(
            conn,
            thread_id=thread_id,
            assistant_id="agent",
            kwargs={"input": None},
            metadata={},
            multitask_strategy="reject",
        )


async def _runs(rt: Runtime, thread_id: str) -> list[dict[str, Any]]:
    async with rt.pool.connection() as conn:
        return await runs.list_for_thread(conn, thread_id, limit=100, offset=0, status=None)


async def test_missed_due_times_fire_once_then_the_schedule_goes_on(runtime: Runtime) -> None:
    cron_id = await _cron(runtime)
    before = await _row(runtime, cron_id)
    assert await fire_due(runtime.pool) == 1
    assert await fire_due(runtime.pool) == 0  # moved past now: nothing due
    after = await _row(runtime, cron_id)
    assert after["next_run_at"] > after["now"] >= before["next_run_at"]
    assert after["next_run_at"].minute % 5 == 0
    async with runtime.pool.connection() as conn:
        found = await threads.search(
            conn, status=None, metadata={"cron_id": cron_id}, limit=10, offset=0
        )
    assert len(found) == 1 and found[0]["owner"] == "ada"
    [run] = await _runs(runtime, found[0]["thread_id"])
    assert run["metadata"]["cron_id"] == cron_id and run["metadata"]["k"] == "v"
    assert datetime.fromisoformat(run["metadata"]["cron_due_at"]) == before["next_run_at"]


async def test_a_busy_thread_enqueues_or_skips(runtime: Runtime) -> None:
    await _busy_thread(runtime, "t-enqueue")
    await _busy_thread(runtime, "t-reject")
    await _cron(runtime, thread_id="t-enqueue")
    skipped = await _cron(runtime, thread_id="t-reject", multitask_strategy="reject")
    assert await fire_due(runtime.pool) == 1
    assert len(await _runs(runtime, "t-enqueue")) == 2
    assert len(await _runs(runtime, "t-reject")) == 1
    row = await _row(runtime, skipped)
    assert row["next_run_at"] > row["now"]  # the skipped due time is gone, the next one stays


async def test_end_time_and_disabled(runtime: Runtime) -> None:
    ended = await _cron(runtime, end_time=datetime.now(UTC) - timedelta(minutes=1))
    paused = await _cron(runtime, enabled=False)
    assert await fire_due(runtime.pool) == 1  # the last due time before end_time
    assert (await _row(runtime, ended))["next_run_at"] is None
    assert (await _row(runtime, paused))["next_run_at"] is not None
