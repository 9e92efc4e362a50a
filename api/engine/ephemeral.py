"""Removing the threads of threadless runs (``POST /runs`` with ``on_completion: delete``, the
default, as on LangGraph Server).

Durable and replica-safe: no in-memory timer. Every process's workers sweep the database every
few seconds for threads whose ``on_completion: delete`` run is finished and has been for
``THREADLINE_THREADLESS_GRACE_SECONDS`` (default 30): the grace lets a client still reading the
stream (or reconnecting with ``Last-Event-ID``), or a ``/runs/wait`` reading the final values,
finish first. The check and the delete are one transaction under the thread's row lock; a
crash loses nothing (the next sweep, on any replica, finds the thread again). A run created on
the thread meanwhile keeps it until that run too has ended.
"""

from __future__ import annotations

import asyncio
import logging

from api.engine.runtime import Runtime
from api.platform.db_health import log_failure
from api.store import ephemeral

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 5.0


async def sweep(runtime: Runtime) -> int:
    """Remove the threads that are due; how many went."""
    grace = runtime.settings.threadless_grace_seconds
    removed = 0
    async with runtime.pool.connection() as conn:
        for thread_id in await ephemeral.done(conn, grace):
            if await ephemeral.remove(conn, thread_id, grace):
                removed += 1
                for adapter in runtime.adapters.values():  # the built-in agent's workspace
                    adapter.thread_deleted(thread_id)
    return removed


async def sweep_loop(runtime: Runtime) -> None:
    every = min(SWEEP_SECONDS, max(runtime.settings.threadless_grace_seconds, 0.5))
    while True:
        try:
            if removed := await sweep(runtime):
                logger.info("removed %d thread(s) of finished threadless runs", removed)
        except Exception as err:
            log_failure(
                logger,
                runtime.pool.health,
                err,
                "removing the threads of threadless runs failed; retrying",
            )
        await asyncio.sleep(every)
