"""Queueing a run in as few round trips as its checks allow (``api.runs.run_create``).

A plain new run reads its thread in its transaction's first round trip, with the thread's lock,
and is checked there: no read of its own before. A run whose checks need more than the thread's
row (new input closing pending approvals reads them from the thread's state) gives up that
transaction before it wrote anything and is checked on a read of its own first, as a resume is.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from api.contract.runs import RunCreate
from api.http.sse import run_events
from api.lifecycle import open_service
from api.platform.errors import Conflict, NotFound
from api.platform.settings import Settings
from api.runs.run_create import MAX_TRIES
from api.store import runs, threads
from tests.utils.tasks import counter, notes


async def _end_of(svc: Any, run_id: str) -> str:
    """The run's status, once its stream ended."""
    frames = [f async for f in run_events(svc.pool, svc.hub, run_id, after=0, modes=["updates"])]
    last = frames[-1].decode()
    assert "event: end" in last, last
    return last.split('"status":"', 1)[1].split('"', 1)[0]


async def test_a_new_run_reads_its_thread_in_its_transaction_unless_its_checks_need_more(
    settings: Settings, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    locks: list[str] = []
    real_get, real_lock = threads.get, runs.lock_and_read_thread

    async def get(conn: Any, thread_id: str, **kw: Any) -> Any:
        reads.append(thread_id)
        return await real_get(conn, thread_id, **kw)

    async def lock_and_read(conn: Any, thread_id: str, **kw: Any) -> Any:
        locks.append(thread_id)
        return await real_lock(conn, thread_id, **kw)

    monkeypatch.setattr(threads, "get", get)
    monkeypatch.setattr(runs, "lock_and_read_thread", lock_and_read)
    async with open_service(settings, runtime=runtime) as svc:
        tid = str(uuid.uuid4())
        async with runtime.pool.connection() as conn:
            await threads.create(conn, tid, {}, None)
        run = await svc.create_run(tid, RunCreate(assistant_id="agent", input=counter(2)))
        assert (reads, locks) == ([], [tid])
        assert await _end_of(svc, run["run_id"]) == "success"

        # No such thread: refused in the transaction, with the same message as before.
        missing = str(uuid.uuid4())
        with pytest.raises(NotFound, match="if_not_exists"):
            await svc.create_run(missing, RunCreate(assistant_id="agent", input=counter(2)))
        assert reads == []

        # A thread waiting for an approval: new input closes it, which reads the pending
        # interrupts. The first transaction is given up and the run checked on a read first.
        asking = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=notes(), if_not_exists="create"),
        )
        waiting = asking["thread_id"]
        assert await _end_of(svc, asking["run_id"]) == "success"  # paused: as on LangGraph
        reads.clear()
        locks.clear()
        message = {"messages": [{"role": "user", "content": "never mind"}]}
        closing = await svc.create_run(waiting, RunCreate(assistant_id="agent", input=message))
        assert (reads, locks) == ([waiting], [waiting])
        assert await _end_of(svc, closing["run_id"]) == "success"
        async with runtime.pool.connection() as conn:
            queued = await runs.list_for_thread(conn, waiting, limit=10, offset=0, status=None)
        assert sorted(r["run_id"] for r in queued) == sorted(
            [asking["run_id"], closing["run_id"]]
        ), "the given-up transaction queued nothing"


async def test_a_run_creating_a_thread_that_appeared_meanwhile_is_refused_and_writes_nothing(
    settings: Settings, runtime: Any
) -> None:
    """``if_not_exists: create`` on an id another transaction is creating: the run's insert of
    the thread waits for it, then the run is refused (409) with nothing of it stored, and its
    slot (one worker) is free for the next run."""
    async with open_service(settings.model_copy(update={"workers": 1}), runtime=runtime) as svc:
        tid = str(uuid.uuid4())
        body = RunCreate(assistant_id="agent", input=counter(2), if_not_exists="create")
        async with (
            runtime.pool.connection() as other,
            runtime.pool.connection() as watch,
            other.transaction(),
        ):
            await threads.create(other, tid, {"by": "other"}, None)
            creating = asyncio.create_task(svc.create_run(tid, body))
            # Until the run's transaction waits for this one's new row.
            for _ in range(200):
                cur = await watch.execute(
                    "SELECT count(*) AS n FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
                if (await cur.fetchone())["n"] or creating.done():
                    break
                await asyncio.sleep(0.05)
            assert not creating.done(), "the run did not wait for the other transaction"
        with pytest.raises(Conflict, match="created meanwhile"):
            await creating

        async with runtime.pool.connection() as conn:
            assert await runs.list_for_thread(conn, tid, limit=10, offset=0, status=None) == []
            thread = await threads.get(conn, tid)
        assert thread is not None and thread["status"] == "idle", thread
        assert thread["metadata"].get("by") == "other", thread
        run = await svc.create_run(tid, RunCreate(assistant_id="agent", input=counter(2)))
        assert await _end_of(svc, run["run_id"]) == "success"
        assert not svc.workers.active


async def test_a_thread_that_appears_while_the_run_is_queued_is_a_conflict_not_a_warning(
    settings: Settings,
    runtime: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The thread is committed by another transaction after the run's first round trip, and its
    insert fails while the run's transaction is still being sent: 409, nothing stored, and
    nothing logged (psycopg warns when a pipeline ends in a second error)."""
    caplog.set_level(logging.WARNING)
    tid = str(uuid.uuid4())
    real_send_insert = runs.send_insert

    async def slow_send_insert(conn: Any, **fields: Any) -> Any:
        await asyncio.sleep(0.3)  # the failed thread insert's result is back by now
        return await real_send_insert(conn, **fields)

    async with open_service(settings, runtime=runtime) as svc:
        real_scope = svc.scope

        async def scope(action: str, value: dict[str, Any]) -> Any:
            # Right before the run's transaction inserts the thread: another one commits it.
            async with runtime.pool.connection() as other:
                await threads.create(other, tid, {"by": "other"}, None)
            return await real_scope(action, value)

        monkeypatch.setattr(svc, "scope", scope)
        monkeypatch.setattr(runs, "send_insert", slow_send_insert)
        body = RunCreate(assistant_id="agent", input=counter(2), if_not_exists="create")
        with pytest.raises(Conflict, match="created meanwhile"):
            await svc.create_run(tid, body)
        async with runtime.pool.connection() as conn:
            assert await runs.list_for_thread(conn, tid, limit=10, offset=0, status=None) == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_run_that_cancels_what_is_active_tries_again_while_runs_keep_coming(
    settings: Settings, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``multitask_strategy: interrupt`` cancels the thread's active runs before its
    transaction; a run queued meanwhile is found in it, and the request cancels that one too and
    tries again, ``MAX_TRIES`` times at most, then says so (409) having queued nothing."""
    phantom = str(uuid.uuid4())  # a run that is always "just queued" by someone else
    asked: list[bool] = []
    real_active_ids = runs.active_ids

    async def active_ids(conn: Any, thread_id: str, *, uncancelled: bool = False) -> list[str]:
        asked.append(uncancelled)
        found = await real_active_ids(conn, thread_id, uncancelled=uncancelled)
        return [*found, phantom] if uncancelled else found

    monkeypatch.setattr(runs, "active_ids", active_ids)
    async with open_service(settings, runtime=runtime, workers=False) as svc:
        tid = str(uuid.uuid4())
        async with runtime.pool.connection() as conn:
            await threads.create(conn, tid, {}, None)
        body = RunCreate(assistant_id="agent", input=counter(2), multitask_strategy="interrupt")
        with pytest.raises(Conflict, match="kept being queued"):
            await svc.create_run(tid, body)
        # Each try: the cancels before the transaction, then the check in it.
        assert asked == [True, True] * (MAX_TRIES + 1)
        async with runtime.pool.connection() as conn:
            assert await real_active_ids(conn, tid) == []
            assert await runs.list_for_thread(conn, tid, limit=10, offset=0, status=None) == []
