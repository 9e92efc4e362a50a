"""The delivery loop of an outbox table (run webhooks, A2A push notifications): every process
runs one per outbox, and any replica sends what is due.

Each pass claims as many due rows as there are free slots (the claim is the table's: ``FOR
UPDATE SKIP LOCKED`` and a lease longer than a delivery may take, so no other replica sends a
row meanwhile) and delivers each in a task of its own; it passes again at once while it took all
it asked for, else after ``poll_seconds``. A pass that fails (the database away a moment) is
logged and tried again. On stop, deliveries in flight get ``STOP_GRACE_SECONDS`` to finish; a
row cut short stays leased and is sent again when its lease expires (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import Any

from psycopg import AsyncConnection

from api.platform.database import Pool
from api.platform.db_health import log_failure
from api.platform.settings import Settings

logger = logging.getLogger(__name__)

CONCURRENCY = 16
"""Deliveries one process has in flight at once, per outbox."""
LEASE_MARGIN_SECONDS = 30.0
"""How much longer than a delivery may take its lease lasts (recording its outcome)."""
MAX_BACKOFF_SECONDS = 300.0
STOP_GRACE_SECONDS = 5.0
"""On shutdown, how long deliveries in flight get to finish; the rest are sent again later."""


def backoff(attempts: int) -> float:
    """Seconds before the next delivery after ``attempts`` failed ones (with jitter)."""
    return min(2.0 ** (attempts - 1), MAX_BACKOFF_SECONDS) * random.uniform(0.8, 1.2)


class OutboxLoop:
    """One process's loop over one outbox: subclasses say how rows are claimed
    (:meth:`claim`) and delivered (:meth:`deliver`)."""

    name = "outbox"
    """For task names and the log."""

    def __init__(self, pool: Pool, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        self.timeout = settings.webhook_timeout_seconds
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def claim(self, conn: AsyncConnection[Any], limit: int, lease: float) -> list[Any]:
        """Up to ``limit`` due rows, leased for ``lease`` seconds."""
        raise NotImplementedError

    async def deliver(self, row: Any) -> None:
        """Send one claimed row and record how it went; an exception leaves it leased."""
        raise NotImplementedError

    async def after_pass(self) -> None:
        """Housekeeping after each pass (nothing by default)."""

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"threadline-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._sending:
            await asyncio.wait(self._sending, timeout=STOP_GRACE_SECONDS)
        for task in list(self._sending):
            task.cancel()  # its row stays leased, and is sent again when the lease expires
        await asyncio.gather(*self._sending, return_exceptions=True)

    async def _loop(self) -> None:
        while True:
            more = False
            try:
                more = await self.deliver_due()
                await self.after_pass()
            except Exception as err:  # the database went away a moment: try again next pass
                log_failure(logger, self.pool.health, err, "%s pass failed", self.name)
            if not more:
                await asyncio.sleep(self.settings.poll_seconds)

    async def deliver_due(self) -> bool:
        """Start delivering the rows due, as many as there are free slots; whether it took all
        it asked for (there may be more)."""
        free = CONCURRENCY - len(self._sending)
        if free <= 0:
            return False
        async with self.pool.connection() as conn:
            rows = await self.claim(conn, free, self.timeout + LEASE_MARGIN_SECONDS)
        for row in rows:
            task = asyncio.create_task(self._guarded(row), name=f"{self.name}-delivery")
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        return len(rows) == free

    async def _guarded(self, row: Any) -> None:
        try:
            await self.deliver(row)
        except Exception as err:  # the row's lease expires, and it is sent again
            log_failure(logger, self.pool.health, err, "%s delivery failed", self.name)
