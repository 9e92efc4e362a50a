"""A run started while its transaction commits (``api.commit_gate``): its graph sets up during
the COMMIT's round trip, and nothing is written and no node runs before the commit is known.
Both ways a plain run starts: on a thread made before, and with ``if_not_exists: create`` (the
thread is inserted in the run's transaction and goes with it).

The commit is made slow, or made to fail, by a deferred constraint trigger on ``runs``: real
PostgreSQL behaviour at ``COMMIT``, for the runs whose metadata asks for it.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from api.commit_gate import COMMIT_GATE_KEY
from api.lifecycle import open_service
from api.schemas import RunCreate
from api.settings import Settings
from api.sse import run_events
from api.store import threads
from tests.utils.tasks import counter

SLOW_COMMIT = """
CREATE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.metadata->>'commit' IN ('slow', 'fail') THEN PERFORM pg_sleep(1.2); END IF;
    IF NEW.metadata->>'commit' = 'fail' THEN RAISE EXCEPTION 'refused at commit'; END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON runs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit();
"""
"""1.2 s at COMMIT: more than two heartbeats (0.5 s in the tests' settings)."""


async def _end_of(svc: Any, run_id: str) -> tuple[str, str]:
    """The run's status once its stream ended, and the stream's text."""
    frames = [f async for f in run_events(svc.pool, svc.hub, run_id, after=0, modes=["updates"])]
    text = b"".join(frames).decode()
    assert "event: end" in text, text
    return text.rsplit('"status":"', 1)[1].split('"', 1)[0], text


@pytest.fixture
def calls(runtime: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each checkpoint the run's graph saves: its step, and whether its run's gate was open
    when the save was asked for and when it returned (``returned``: None when it raised)."""
    calls: list[dict[str, Any]] = []
    real = runtime.saver.aput

    async def aput(config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        gate = config["configurable"].get(COMMIT_GATE_KEY)
        call = {"step": metadata.get("step"), "gated": gate is not None, "returned": None}
        call["open_at_entry"] = gate is None or gate.open
        calls.append(call)
        saved = await real(config, checkpoint, metadata, versions)
        call["returned"] = gate is None or gate.open
        return saved

    monkeypatch.setattr(runtime.saver, "aput", aput)
    return calls


@pytest.fixture
def one_worker(settings: Settings) -> Settings:
    """One slot: a slot the failed attempt kept would leave the next run queued forever."""
    return settings.model_copy(update={"workers": 1})


@pytest.fixture(params=["existing thread", "created with the run"])
async def tid(runtime: Any, request: pytest.FixtureRequest) -> str:
    """A thread id, on a database whose runs commit slowly (or fail to) when they ask for it:
    a thread made before, or a new id the run creates (``if_not_exists: create``)."""
    async with runtime.pool.connection() as conn:
        await conn.execute(SLOW_COMMIT.encode(), prepare=False)
        if request.param == "existing thread":
            await threads.create(conn, thread_id := str(uuid.uuid4()), {}, None)
        else:
            thread_id = str(uuid.uuid4())
    return thread_id


def _body(**fields: Any) -> RunCreate:
    """A plain run's body; it creates its thread if there is none."""
    return RunCreate(assistant_id="agent", input=counter(2), if_not_exists="create", **fields)


async def test_the_graph_starts_during_the_commit_and_waits_for_it(
    one_worker: Settings, runtime: Any, tid: str, calls: list[dict[str, Any]]
) -> None:
    async with open_service(one_worker, runtime=runtime) as svc:
        body = _body(metadata={"commit": "slow"})
        run = await svc.create_run(tid, body)
        status, text = await _end_of(svc, run["run_id"])

    assert status == "success", text
    # Started before its transaction committed: LangGraph asked for its first checkpoints
    # while the COMMIT was still out (1.2 s), and none of them came back before it landed.
    assert calls and all(c["gated"] for c in calls), calls
    assert any(not c["open_at_entry"] for c in calls), calls
    assert all(c["returned"] for c in calls), calls
    # The heartbeats during the commit did not take it for a lost lease: one attempt.
    assert '"attempt":1' in text and '"attempt":2' not in text, text


async def test_a_failed_commit_stops_the_attempt_before_it_writes_or_runs_a_node(
    one_worker: Settings, runtime: Any, tid: str, calls: list[dict[str, Any]]
) -> None:
    async with open_service(one_worker, runtime=runtime) as svc:
        async with runtime.pool.connection() as conn:
            existed = await threads.get(conn, tid) is not None
        body = _body(metadata={"commit": "fail"})
        with pytest.raises(psycopg.errors.RaiseException, match="refused at commit"):
            await svc.create_run(tid, body)

        # LangGraph had started: its input checkpoint was asked for. None was saved, and no
        # step after ``__start__`` (step 0) began: every save raised at the gate.
        assert calls and all(c["returned"] is None for c in calls), calls
        assert {c["step"] for c in calls} <= {-1, 0}, calls
        async with runtime.pool.connection() as conn:
            for table in ("runs", "checkpoints", "checkpoint_writes", "audit_log"):
                cur = await conn.execute(f"SELECT count(*) AS n FROM {table}")
                assert (await cur.fetchone())["n"] == 0, table
            cur = await conn.execute("SELECT count(*) AS n FROM run_events")
            assert (await cur.fetchone())["n"] == 0
            thread = await threads.get(conn, tid)
        if existed:
            assert thread is not None and thread["status"] == "idle"
        else:  # created in the transaction that failed: not there
            assert thread is None

        # The attempt gave its slot back: the next run (one worker) starts and ends.
        calls.clear()
        run = await svc.create_run(tid, _body())
        status, text = await _end_of(svc, run["run_id"])
    assert status == "success", text
    assert not svc.workers.active
