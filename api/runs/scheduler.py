"""The scheduler every process runs: each due schedule fires once per due time, across replicas.

One transaction per pass: the due rows are taken with ``FOR UPDATE SKIP LOCKED`` (a row another
replica holds is its to fire), each one's run is queued (``api.store.runs.insert``, the same
row a ``POST /runs`` makes; the workers execute it) and its ``next_run_at`` moves to its first
due time after now, then commit. A crash before the commit fires nothing and moves nothing: the
next pass (this replica's after a restart, or another's) fires it. A schedule that came due
several times while no replica ran fires once, then keeps to its schedule.

A thread-bound schedule whose thread has an active run: ``enqueue`` (the default) queues its run
behind it; ``reject`` skips that due time. Each run's metadata names its schedule (``cron_id``)
and due time (``cron_due_at``); its ``auth_user`` is the schedule owner's, recorded at creation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

from api.durable.hub import Hub
from api.platform.database import Pool
from api.platform.db_health import log_failure
from api.runs.assistant_config import RunAssistant, default_assistant_id, merged
from api.runs.cron_schedule import next_after
from api.store import assistants, crons, runs, threads
from api.store.rows import iso

logger = logging.getLogger(__name__)
BATCH = 20


def next_due(row: dict[str, Any], now: datetime) -> datetime | None:
    """The first due time after ``now`` (None past ``end_time``, or if it never fires)."""
    try:
        found = next_after(row["schedule"], row["timezone"], max(now, row["next_run_at"]))
    except Exception:
        logger.warning("schedule %s: %r has no next due time", row["cron_id"], row["schedule"])
        return None
    if row["end_time"] is not None and found > row["end_time"]:
        return None
    return found


async def _assistant(conn: AsyncConnection[Any], assistant_id: str) -> RunAssistant | None:
    """The schedule's assistant as it is now. A schedule made before assistants were stored
    names a graph: its default assistant, or the graph alone when it has none (yet)."""
    key = assistants.as_uuid(assistant_id)
    row = await assistants.get(conn, key or uuid.UUID(default_assistant_id(assistant_id)))
    if row is not None and key is None and not (row["system"] and row["graph_id"] == assistant_id):
        return None  # its default's id is taken by a tenant's assistant (api.runs.assistant_access)
    if row is not None:
        return RunAssistant.from_row(row)
    return None if key is not None else RunAssistant(assistant_id, assistant_id)


async def _fire(conn: AsyncConnection[Any], row: dict[str, Any]) -> dict[str, Any] | None:
    """Queue the run for the row's due time, with its assistant's config and context as they
    are now (as LangGraph Server creates each run); None when its thread is busy and it
    rejects, or its assistant is gone."""
    cron_id = str(row["cron_id"])
    thread_id = row["thread_id"]
    strategy = row["multitask_strategy"]
    assistant = await _assistant(conn, row["assistant_id"])
    if assistant is None:
        logger.warning("schedule %s: its assistant is gone, due time skipped", cron_id)
        return None
    if thread_id is None:
        thread_id = str(uuid.uuid4())
        await threads.create(conn, thread_id, {"cron_id": cron_id}, row["owner"])
        strategy = "reject"
    else:
        active = await runs.lock_thread(conn, thread_id)
        if active is None:
            return None  # the thread went (its schedules go with it)
        if active and strategy == "reject":
            logger.info("schedule %s: thread %s is busy, due time skipped", cron_id, thread_id)
            return None
    kwargs = dict(row["kwargs"])
    kwargs["config"], context = merged(assistant, kwargs.get("config"), kwargs.get("context"))
    if context is not None:
        kwargs["context"] = context
    if row["thread_id"] is None and row["on_run_completed"] == "delete":
        kwargs["on_completion"] = "delete"
    run = await runs.insert(
        conn,
        thread_id=thread_id,
        assistant_id=assistant.assistant_id,
        graph_id=assistant.graph_id,
        kwargs=kwargs,
        metadata={**row["metadata"], "cron_id": cron_id, "cron_due_at": iso(row["next_run_at"])},
        multitask_strategy=strategy,
    )
    return run


async def fire_due(pool: Pool) -> int:
    """One pass: fire every due schedule no other replica holds; how many runs were queued."""
    queued = 0
    async with pool.connection() as conn, conn.transaction():
        for row in await crons.lock_due(conn, BATCH):
            try:
                async with conn.transaction():
                    queued += await _fire(conn, row) is not None
            except Exception:
                logger.exception("schedule %s could not fire; due time skipped", row["cron_id"])
            await crons.advance(conn, row["cron_id"], next_due(row, row["now"]))
    return queued


class Scheduler:
    """This process's loop over :func:`fire_due`, every ``poll_seconds``."""

    def __init__(self, pool: Pool, hub: Hub, poll_seconds: float) -> None:
        self.pool = pool
        self.hub = hub
        self.poll_seconds = poll_seconds
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="threadline-scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                queued = 0
                while (n := await fire_due(self.pool)) > 0:
                    queued += n
                    if n < BATCH:
                        break
                if queued:
                    self.hub.runs_changed.set()  # this process's workers: now, not at the echo
            except Exception as err:  # the database went away a moment: try again next pass
                log_failure(logger, self.pool.health, err, "scheduler pass failed")
            await asyncio.sleep(self.poll_seconds)
