"""The event log's group commit (``api.durable.event_writer``): fewer transactions, same guarantees.

Events are stored in batches, one statement and one commit each; a stream gets a batch only
after its commit; a checkpoint is written only after the events emitted before it are stored;
a writer fenced out by a takeover stores nothing more.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from api.contract.runs import RunCreate
from api.durable import event_writer
from api.durable.event_writer import Emitter
from api.durable.hub import Hub
from api.durable.run_memory import run_configurable
from api.durable.saver import PooledSaver
from api.engine.execution import Executor
from api.lifecycle import open_service
from api.platform.database import run_to_completion
from api.store import events, runs, threads
from api.store.events import LostRun
from tests.api.conftest import FAST
from tests.utils.locks import cancel_while_it_waits
from tests.utils.processes import kill_strays
from tests.utils.runs import claimed_run
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter


async def _stored(runtime: Any, run_id: str) -> list[dict[str, Any]]:
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT seq, created_at FROM run_events WHERE run_id = %s ORDER BY seq",
            (uuid.UUID(run_id),),
        )
        return list(await cur.fetchall())


async def test_events_are_stored_in_batches_and_streamed_only_once_stored(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await claimed_run(runtime)
    hub = Hub(runtime.database.url)
    trail: list[tuple[str, int]] = []
    real_append = events.append_batch

    async def append_batch(conn: Any, run_id: str, attempt: int, batch: Any, **kw: Any) -> None:
        await asyncio.sleep(0.02)  # a write takes a while: what comes meanwhile waits for it
        await real_append(conn, run_id, attempt, batch, **kw)
        trail.append(("stored", batch[-1][0]))

    real_publish = hub.publish

    def publish(run_id: str, stored: list[tuple[int, str, str]]) -> None:
        trail.append(("published", stored[-1][0]))
        real_publish(run_id, stored)

    monkeypatch.setattr(events, "append_batch", append_batch)
    monkeypatch.setattr(hub, "publish", publish)
    waiter = hub.subscribe(run.run_id)
    emitter = Emitter(runtime.pool, hub, run.run_id, run.attempt, run.thread_id)
    for i in range(60):
        await emitter.emit("custom", {"i": i})
        await asyncio.sleep(0.002)
    await emitter.barrier()

    rows = await _stored(runtime, run.run_id)
    assert [r["seq"] for r in rows] == list(range(1, 61))
    # One transaction per batch: its rows share the transaction's now().
    batches = len({r["created_at"] for r in rows})
    assert 1 < batches < 30, batches
    assert [kind for kind, _ in trail].count("stored") == batches
    # Each batch reached the stream after its commit, in order.
    assert trail == [(kind, seq) for _, seq in trail[::2] for kind in ("stored", "published")]
    assert [seq for seq, _, _ in waiter.buffer] == list(range(1, 61))


async def test_the_first_event_a_node_emits_is_stored_without_waiting_for_the_delay(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a delay longer than the test, only the first ``custom`` event (a node's, while it
    runs) is stored before the checkpoint or the attempt's end, and its ``emit`` returns once it
    is (the graph waits for it); an ``updates`` event, which a step's checkpoint takes along,
    and later ``custom`` ones wait."""
    monkeypatch.setattr(event_writer, "LINGER_SECONDS", 60.0)
    run = await claimed_run(runtime)
    emitter = Emitter(runtime.pool, Hub(runtime.database.url), run.run_id, 1, run.thread_id)
    await emitter.emit("metadata", {"run_id": run.run_id, "attempt": 1})
    await emitter.emit("updates", {"start": {}})
    await asyncio.sleep(0.3)
    assert await _stored(runtime, run.run_id) == []
    await emitter.emit("custom", {"type": "plan"})
    # Stored when its emit returns, with what was queued before it.
    assert [r["seq"] for r in await _stored(runtime, run.run_id)] == [1, 2, 3]
    await emitter.emit("custom", {"type": "later"})
    await asyncio.sleep(0.3)
    assert [r["seq"] for r in await _stored(runtime, run.run_id)] == [1, 2, 3]
    await emitter.close()
    assert [r["seq"] for r in await _stored(runtime, run.run_id)] == [1, 2, 3, 4]


async def test_a_writer_fenced_out_by_a_takeover_stores_nothing_more(runtime: Any) -> None:
    run = await claimed_run(runtime)
    emitter = Emitter(
        runtime.pool, Hub(runtime.database.url), run.run_id, run.attempt, run.thread_id
    )
    await emitter.emit("custom", {"before": True})
    await emitter.barrier()
    async with runtime.pool.connection() as conn:  # another worker took the run over
        await conn.execute(
            "UPDATE runs SET attempt = attempt + 1 WHERE run_id = %s", (uuid.UUID(run.run_id),)
        )
    await emitter.emit("custom", {"after": 1})
    await emitter.emit("custom", {"after": 2})
    with pytest.raises(LostRun):
        await emitter.barrier()
    with pytest.raises(LostRun):
        await emitter.emit("custom", {"after": 3})
    assert [r["seq"] for r in await _stored(runtime, run.run_id)] == [1]


async def test_a_checkpoint_is_written_only_after_the_events_emitted_before_it(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With event writes slowed down, every checkpoint of a real run is written by a statement
    that finds every event emitted before it stored, or stores it itself (one statement: the
    events and the checkpoint commit together). (A task's writes do not wait: see
    api.durable.task_writes.)"""
    emitted: list[int] = []
    checks: list[tuple[int, int, int]] = []
    real_emit = Emitter.emit
    real_append = events.append_batch

    async def emit(self: Emitter, event: str, data: Any) -> None:
        await real_emit(self, event, data)
        emitted.append(self.seq)

    async def slow_append(conn: Any, run_id: str, attempt: int, batch: Any, **kw: Any) -> None:
        await asyncio.sleep(0.15)
        await real_append(conn, run_id, attempt, batch, **kw)

    async def count_committed() -> int:
        async with runtime.pool.connection() as conn:
            cur = await conn.execute("SELECT count(*) AS n FROM run_events")
            row = await cur.fetchone()
            return int(row["n"])

    real_put, real_store = PooledSaver.aput, PooledSaver._store
    # Events emitted when the call entered the saver.
    entered: contextvars.ContextVar[int] = contextvars.ContextVar("entered")

    async def put(self: Any, config: Any, *args: Any) -> Any:
        entered.set(len(emitted))
        return await real_put(self, config, *args)

    async def checked_store(conn: Any, sql: str, params: dict[str, Any], *args: Any) -> None:
        # What the checkpoint's statement finds committed, and the events it carries itself.
        carried = int(params.get("expected", 0))
        # (0 for task writes stored with held checkpoints: no checkpoint entered the saver.)
        checks.append((entered.get(0), await count_committed(), carried))
        await real_store(conn, sql, params, *args)

    monkeypatch.setattr(Emitter, "emit", emit)
    monkeypatch.setattr(events, "append_batch", slow_append)
    monkeypatch.setattr(PooledSaver, "aput", put)
    monkeypatch.setattr(PooledSaver, "_store", staticmethod(checked_store))
    async with open_service(settings, runtime=runtime) as svc:
        created = await svc.create_run(
            str(uuid.uuid4()),
            RunCreate(assistant_id="agent", input=counter(3), if_not_exists="create"),
        )
        deadline = time.monotonic() + 60
        while (await svc.refreshed_run(created["thread_id"], created["run_id"]))["status"] in (
            "pending",
            "running",
        ):
            assert time.monotonic() < deadline, "the run did not end"
            await asyncio.sleep(0.1)
    assert (await svc.refreshed_run(created["thread_id"], created["run_id"]))["status"] == "success"
    later = [c for c in checks if c[0] > 0]  # after the run's first event
    assert len(later) >= 5
    assert all(committed + carried >= before for before, committed, carried in later), checks
    # Some events were not stored yet when their step ended: they went in with its checkpoint.
    assert any(carried > 0 for _, _, carried in later), checks


def _nowork_config(project: Path) -> Path:
    """A ``langgraph.json`` serving the benchmark's no-work graph (12 quick supersteps)."""
    project.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "bench" / "nowork.py", project)
    config = project / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"nowork": "./nowork.py:graph"}}))
    return config


async def test_runs_cancelled_mid_checkpoint_leave_no_connection_holding_a_transaction(
    database_url: str, tmp_path: Path
) -> None:
    """A run cancelled while its checkpoint (and the events riding with it) is being written
    must leave its pooled connection clean. Written in pipeline mode, a cancelled checkpoint
    left a connection holding an open transaction: the threads created on it later were
    answered (200) but never committed, so nobody else saw them. Found by CI (a 404 for a thread
    just created); this reproduced it 94 times in 150 cancellations."""
    config = _nowork_config(tmp_path / "project")
    proc = ServerProcess(database_url, tmp_path / "data", config=config, name="cancels", **FAST)
    rng = random.Random(7)
    invisible: list[str] = []
    try:
        proc.start()
        async with (
            httpx.AsyncClient(base_url=proc.url, timeout=30) as http,
            httpx.AsyncClient(base_url=proc.url, timeout=30) as other,
        ):
            for _ in range(40):
                tid = (await http.post("/threads", json={})).json()["thread_id"]
                run = await http.post(
                    f"/threads/{tid}/runs", json={"assistant_id": "nowork", "input": {}}
                )
                assert run.status_code == 200, run.text
                await asyncio.sleep(rng.uniform(0.0, 0.08))
                await http.post(f"/threads/{tid}/runs/{run.json()['run_id']}/cancel")
                for _ in range(3):
                    new = (await http.post("/threads", json={})).json()["thread_id"]
                    if (await other.get(f"/threads/{new}")).status_code != 200:
                        invisible.append(new)
    finally:
        proc.stop()
        kill_strays(tmp_path / "data")
    assert invisible == []


async def test_a_checkpoint_carrying_events_of_a_fenced_out_attempt_is_not_written(
    runtime: Any,
) -> None:
    """The checkpoint's statement reads nothing back: when another worker took the run over,
    the fence fails the statement. Neither the events nor the checkpoint are stored, and the
    writer says LostRun (then and afterwards)."""
    run = await claimed_run(runtime)
    emitter = Emitter(
        runtime.pool, Hub(runtime.database.url), run.run_id, run.attempt, run.thread_id
    )
    saver = runtime.saver
    assert isinstance(saver, PooledSaver)
    config: Any = {
        "configurable": {
            "thread_id": run.thread_id,
            "checkpoint_ns": "",
            **run_configurable(emitter.with_checkpoint),
        }
    }
    await emitter.emit("custom", {"step": 1})
    await saver.aput(config, empty_checkpoint(), {"step": -1}, {})  # held: stored
    async with runtime.pool.connection() as conn:  # another worker took the run over
        await conn.execute(
            "UPDATE runs SET attempt = attempt + 1 WHERE run_id = %s", (uuid.UUID(run.run_id),)
        )
    await emitter.emit("custom", {"step": 2})
    with pytest.raises(LostRun):
        await saver.aput(config, empty_checkpoint(), {"step": 0}, {})
    assert [r["seq"] for r in await _stored(runtime, run.run_id)] == [1]
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (run.thread_id,)
        )
        assert (await cur.fetchone())["n"] == 1  # the first checkpoint only
        # The connection went back to the pool clean: its next statement commits.
        assert conn.info.transaction_status.name == "IDLE"
    with pytest.raises(LostRun):
        await emitter.emit("custom", {"step": 3})


async def test_events_stored_by_a_checkpoint_cancelled_mid_write_are_streamed_once(
    runtime: Any, database_url: str
) -> None:
    """A run cancelled while its checkpoint's statement (carrying events) waits: the statement
    completes, and its events are published to streams, not queued to be stored a second
    time (which would fail the writer on a duplicate sequence number)."""
    run = await claimed_run(runtime)
    hub = Hub(runtime.database.url)
    waiter = hub.subscribe(run.run_id)
    emitter = Emitter(runtime.pool, hub, run.run_id, run.attempt, run.thread_id)
    saver = runtime.saver
    base = {"thread_id": run.thread_id, "checkpoint_ns": ""}
    config: Any = {"configurable": {**base, **run_configurable(emitter.with_checkpoint)}}
    step = empty_checkpoint()
    await saver.aput({"configurable": base}, step, {"step": -1}, {})  # written again below
    await emitter.emit("custom", {"step": 1})
    checkpoint = saver.aput(config, step, {"step": -1}, {})
    await cancel_while_it_waits(database_url, run.thread_id, step["id"], checkpoint)
    assert [seq for seq, _, _ in waiter.buffer] == [1]
    await emitter.emit("custom", {"step": 2})
    await emitter.barrier()  # the writer goes on, from the next number
    assert emitter.failed is None
    assert [r["seq"] for r in await _stored(runtime, run.run_id)] == [1, 2]


async def test_a_checkpoint_cancelled_mid_write_completes_before_the_cancellation() -> None:
    """``run_to_completion``: the caller's cancellation waits for the work, then is raised."""
    done: list[str] = []

    async def work() -> str:
        await asyncio.sleep(0.1)
        done.append("committed")
        return "ok"

    caller = asyncio.create_task(run_to_completion(work()))
    await asyncio.sleep(0.02)
    caller.cancel()
    await asyncio.sleep(0.01)
    assert not caller.done()  # still waiting for the work
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert done == ["committed"]
    assert await run_to_completion(work()) == "ok"


async def test_the_end_of_a_fenced_out_attempt_writes_nothing(runtime: Any) -> None:
    """The run's last statement (end event, run status, thread status) is fenced too: an
    attempt that lost its run gets LostRun, and neither the end nor the statuses change."""
    run = await claimed_run(runtime)
    hub = Hub(runtime.database.url)
    emitter = Emitter(runtime.pool, hub, run.run_id, run.attempt, run.thread_id)
    async with runtime.pool.connection() as conn:  # another worker took the run over
        await conn.execute(
            "UPDATE runs SET attempt = attempt + 1 WHERE run_id = %s", (uuid.UUID(run.run_id),)
        )
    with pytest.raises(LostRun):
        await Executor(runtime, hub).finish(emitter, run, "success", None)
    assert await _stored(runtime, run.run_id) == []
    async with runtime.pool.connection() as conn:
        row = await (await conn.execute("SELECT status FROM runs")).fetchone()
        thread = await threads.get(conn, run.thread_id)
    assert row is not None and row["status"] == "running"
    assert thread is not None and thread["status"] == "busy"


async def test_a_runs_end_leaves_its_thread_idle_or_busy_behind_a_queued_run(runtime: Any) -> None:
    """One statement ends the run and sets its thread's status: it leaves the ending run out of
    the "still busy" check (it sees the run as running), but not a run queued behind it."""
    hub = Hub(runtime.database.url)
    statuses = []
    for queued in (False, True):
        run = await claimed_run(runtime)
        if queued:
            async with runtime.pool.connection() as conn:
                await runs.insert(
                    conn,
                    thread_id=run.thread_id,
                    assistant_id="agent",
                    kwargs={},
                    metadata={},
                    multitask_strategy="enqueue",
                )
        emitter = Emitter(runtime.pool, hub, run.run_id, run.attempt, run.thread_id)
        await emitter.emit("custom", {"last": True})
        await Executor(runtime, hub).finish(emitter, run, "success", None, values={"answer": 42})
        async with runtime.pool.connection() as conn:
            thread = await threads.get(conn, run.thread_id)
            ended = await runs.by_id(conn, run.run_id)
        assert ended is not None and ended["status"] == "success"
        assert thread is not None and thread["values"] == {"answer": 42}
        assert [r["seq"] for r in await _stored(runtime, run.run_id)] == [1, 2]  # and the end
        statuses.append(thread["status"])
    assert statuses == ["idle", "busy"]
