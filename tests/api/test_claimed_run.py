"""The run a worker holds (``api.store.claimed_run``): a frozen, typed object built once from the
row of a claimed run, whether the claim statement took it from the queue or its insert claimed
it at once, and the same either way."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime

import pytest

from api.engine.runtime import Runtime
from api.store import runs, threads
from api.store.claimed_run import ClaimedRun

KWARGS = {"input": {"topic": "tides"}, "stream_mode": ["values"]}


async def _queued(runtime: Runtime, *, graph_id: str | None = None) -> str:
    thread_id = str(uuid.uuid4())
    async with runtime.pool.connection() as conn:
        await threads.create(conn, thread_id, {}, None)
        await runs.insert(
            conn,
            thread_id=thread_id,
            assistant_id="agent",
            graph_id=graph_id,
            kwargs=KWARGS,
            metadata={"by": "test"},
            multitask_strategy="enqueue",
        )
    return thread_id


async def test_a_claim_returns_a_frozen_typed_run(runtime: Runtime) -> None:
    thread_id = await _queued(runtime)
    async with runtime.pool.connection() as conn:
        [(run, last_seq)] = await runs.claim(conn, "test", 30.0)
    assert isinstance(run, ClaimedRun)
    assert last_seq == 0
    assert (run.thread_id, run.assistant_id, run.graph_id) == (thread_id, "agent", "agent")
    assert uuid.UUID(run.run_id)  # the row's uuid, as text
    assert (run.attempt, run.stalled_attempts, run.no_checkpoint) == (1, 0, True)
    assert run.kwargs == KWARGS
    assert isinstance(run.created_at, datetime) and isinstance(run.claimed_at, datetime)
    assert run.claimed_at >= run.created_at  # the claim set ``updated_at``
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.attempt = 2  # type: ignore[misc]


async def test_a_run_claimed_at_once_is_the_same_kind_of_run(runtime: Runtime) -> None:
    """The insert that claims a run where it is created reads it as a claim would; a run only
    queued has no claimed attempt."""
    thread_id = str(uuid.uuid4())
    async with runtime.pool.connection() as conn:
        await threads.create(conn, thread_id, {}, None)
        async with conn.transaction():
            started = await runs.send_insert(
                conn,
                thread_id=thread_id,
                assistant_id="agent",
                kwargs=KWARGS,
                metadata={},
                multitask_strategy="reject",
                start=("test", 30.0),
            )
        shown = await started.row()
        queued = await runs.send_insert(
            conn,
            thread_id=thread_id,
            assistant_id="agent",
            kwargs=KWARGS,
            metadata={},
            multitask_strategy="enqueue",
        )
        await queued.row()
    run = started.claimed
    assert run is not None and queued.claimed is None
    assert (run.run_id, run.thread_id, run.attempt) == (shown["run_id"], thread_id, 1)
    assert (run.stalled_attempts, run.no_checkpoint) == (0, True)
    assert run.claimed_at == run.created_at  # claimed in the statement that created it


async def test_the_graph_a_run_executes_is_its_own_or_its_assistants(runtime: Runtime) -> None:
    await _queued(runtime, graph_id="other")
    async with runtime.pool.connection() as conn:
        [(run, _)] = await runs.claim(conn, "test", 30.0)
    assert (run.assistant_id, run.graph_id) == ("agent", "other")
