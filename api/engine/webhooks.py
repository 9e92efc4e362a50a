"""Run webhooks: every process delivers, from the outbox (``api.store.webhooks``), the webhooks
of runs that ended, on any replica.

- Durable: a run's webhook is recorded in the statement that ends the run
  (``api.store.run_end``), so a run that ended has its webhook to send, whatever happens to its
  process next; a replica that restarts, or any other, sends it.
- Once: a delivery claims its row and counts the attempt in one statement (``FOR UPDATE SKIP
  LOCKED``: a row another replica is claiming is skipped), and holds it by a lease longer than a
  delivery may take (``webhook_timeout_seconds`` and a margin), so no other replica sends it
  meanwhile. A 2xx deletes the row.
- Retries: after a connection error, a timeout, a host that does not resolve, 429 or a 5xx, the
  webhook is due again 1 s, 2 s, 4 s... later (at most 5 min), until ``webhook_max_attempts``;
  then, or at once after another answer (a 4xx, a redirect other than 307/308) or a host the
  SSRF guard now refuses (``api.contract.webhook_url``), it is marked ``failed``, logged, and kept
  for ``FAILED_DAYS`` (its ``last_error`` says why).
- At least once, not exactly once, across a crash during the POST itself: a process that dies
  after the receiver got the webhook but before its 2xx was recorded (or that cannot record it,
  the database being away) leaves the row leased, and it is sent again once the lease expires.
  No server can avoid that; receivers that must not act twice dedupe on ``run_id``.

As LangGraph Server, webhooks are sent for runs an attempt ended (``success``, ``error``,
``interrupted`` by a cancel), not for a queued run cancelled before it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson

from api.contract.webhook_url import WebhookPolicy
from api.engine.webhook_payload import payload
from api.engine.webhook_send import client, post
from api.platform.database import Pool
from api.platform.db_health import log_failure
from api.platform.settings import Settings
from api.store import webhooks

logger = logging.getLogger(__name__)

CONCURRENCY = 16
"""Deliveries one process has in flight at once."""
LEASE_MARGIN_SECONDS = 30.0
"""How much longer than a delivery may take its lease lasts (recording its outcome)."""
MAX_BACKOFF_SECONDS = 300.0
FAILED_DAYS = 7.0
STOP_GRACE_SECONDS = 5.0
"""On shutdown, how long deliveries in flight get to finish; the rest are sent again later."""


def backoff(attempts: int) -> float:
    """Seconds before the next delivery after ``attempts`` failed ones (with jitter)."""
    return min(2.0 ** (attempts - 1), MAX_BACKOFF_SECONDS) * random.uniform(0.8, 1.2)


class WebhookDelivery:
    """This process's delivery loop, every ``poll_seconds`` (at once while there is more)."""

    def __init__(self, pool: Pool, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        self.timeout = settings.webhook_timeout_seconds
        self._http: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._purged: float | None = None

    async def start(self) -> None:
        self._http = client(WebhookPolicy.of(self.settings), self.timeout)
        self._task = asyncio.create_task(self._loop(), name="threadline-webhooks")

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
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _loop(self) -> None:
        while True:
            more = False
            try:
                more = await self.deliver_due()
                await self._purge()
            except Exception as err:  # the database went away a moment: try again next pass
                log_failure(logger, self.pool.health, err, "webhook delivery pass failed")
            if not more:
                await asyncio.sleep(self.settings.poll_seconds)

    async def deliver_due(self) -> bool:
        """Start delivering the webhooks due, as many as there are free slots; whether it took
        all it asked for (there may be more)."""
        free = CONCURRENCY - len(self._sending)
        if free <= 0:
            return False
        async with self.pool.connection() as conn:
            rows = await webhooks.claim(conn, free, self.timeout + LEASE_MARGIN_SECONDS)
        for row in rows:
            task = asyncio.create_task(self._deliver(row), name=f"webhook-{row['run_id']}")
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        return len(rows) == free

    async def _deliver(self, row: dict[str, Any]) -> None:
        run_id, host = row["run_id"], _host(row["url"])
        most = self.settings.webhook_max_attempts
        try:
            if row["attempts"] > most:  # its last attempt never finished (its process died)
                async with self.pool.connection() as conn:
                    await webhooks.give_up(conn, row, "its last attempt did not finish")
                logger.warning("webhook of run %s to %s failed: no attempt left", run_id, host)
                return
            assert self._http is not None
            body = orjson.dumps(payload(row, datetime.now(UTC)))
            result = await post(self._http, row["url"], body, self.timeout)
            async with self.pool.connection() as conn:
                if result.delivered:
                    await webhooks.delivered(conn, row)
                    logger.info("webhook of run %s delivered to %s", run_id, host)
                elif result.retry and row["attempts"] < most:
                    delay = backoff(row["attempts"])
                    await webhooks.retry_later(conn, row, delay, result.detail)
                    logger.info(
                        "webhook of run %s to %s: %s; attempt %d of %d in %.1f s",
                        *(run_id, host, result.detail, row["attempts"] + 1, most, delay),
                    )
                else:
                    await webhooks.give_up(conn, row, result.detail)
                    logger.warning(
                        "webhook of run %s to %s failed after %d attempt(s): %s",
                        *(run_id, host, row["attempts"], result.detail),
                    )
        except Exception as err:  # the row's lease expires, and it is sent again
            log_failure(logger, self.pool.health, err, "webhook of run %s", run_id)

    async def _purge(self) -> None:
        if self._purged is not None and time.monotonic() - self._purged < 3600:
            return
        async with self.pool.connection() as conn:
            await webhooks.purge_failed(conn, FAILED_DAYS)
        self._purged = time.monotonic()


def _host(url: str) -> str:
    """Where a webhook goes, for the log: its host (its path and query may hold a secret)."""
    try:
        return httpx.URL(url).host
    except Exception:
        return "(invalid URL)"
