"""Runs handed back to the queue by the process that claimed them, without being judged.

A run handed back (``runs.release``) is claimed again at once, as its next attempt, and its
attempt does not count against it: a claim cancelled mid-statement took it (the process is
stopping), or the database went away under it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from api.durable.hub import Hub
from api.platform.database import Pool
from api.platform.db_health import describe, log_failure
from api.platform.logs import run_context
from api.store import runs
from api.store.claimed_run import ClaimedRun

logger = logging.getLogger(__name__)


async def release_claimed(
    pool: Pool, claiming: asyncio.Future[list[tuple[ClaimedRun, int]]], worker_id: str
) -> None:
    """Hand back what a claim cancelled mid-statement took: nothing will execute it here."""
    try:
        claimed = await claiming
    except Exception:
        return
    for run, _ in claimed:
        with run_context(run.run_id, run.thread_id, run.attempt):
            try:
                async with pool.connection() as conn:
                    await runs.release(conn, run.run_id, run.attempt, worker_id)
            except Exception as err:
                log_failure(
                    logger,
                    pool.health,
                    err,
                    "handing back run %s failed; its lease expires",
                    run.run_id,
                )


async def after_database_fault(
    pool: Pool,
    hub: Hub,
    run: ClaimedRun,
    worker_id: str,
    err: BaseException,
    stopping: Callable[[], bool],
) -> None:
    """The database went away under the attempt: not the run's fault. Once it answers again,
    the run is handed back (not judged) and continues from its last checkpoint as its next
    attempt, here or on another replica; if another claimed it meanwhile (its lease ran out),
    nothing is left to do. A process stopping meanwhile leaves it to its lease.

    Only an outage of the service's database is surely not the run's: when the server answered
    all along, the error may be the graph's own (a node's connection to a database of its own
    raises the same errors), so the attempt is given up judged, and a run that fails so every
    time ends after ``THREADLINE_MAX_ATTEMPTS`` rather than being handed back forever."""
    health = pool.health
    outages, was_down = health.outages, health.down
    health.fault(err)
    logger.warning(
        "run %s attempt %s: stopped by a database fault (%s); handed back once the database"
        " answers",
        run.run_id,
        run.attempt,
        describe(err),
    )
    while not stopping():
        if await health.wait_up(timeout=1.0):
            break
    if stopping() and health.down:
        return
    outage = was_down or health.outages > outages
    try:
        async with pool.connection() as conn:
            if outage:
                await runs.release(conn, run.run_id, run.attempt, worker_id)
            else:
                await runs.give_up(conn, run.run_id, run.attempt, worker_id)
    except Exception as again:
        logger.warning("run %s: handing it back failed (%s); its lease expires", run.run_id, again)
        return
    hub.runs_changed.set()  # claim it again now, not at the next poll
