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

The loop itself (claims, concurrency, backoff, stopping) is ``api.engine.outbox_loop``'s, shared
with A2A push notifications. As LangGraph Server, webhooks are sent for runs an attempt ended
(``success``, ``error``, ``interrupted`` by a cancel), not for a queued run cancelled before it
started.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from psycopg import AsyncConnection

from api.contract.webhook_url import WebhookPolicy
from api.engine.outbox_loop import OutboxLoop, backoff
from api.engine.webhook_payload import payload
from api.engine.webhook_send import client, post
from api.platform.database import Pool
from api.platform.db_health import log_failure
from api.platform.settings import Settings
from api.store import webhooks

logger = logging.getLogger(__name__)

FAILED_DAYS = 7.0


class WebhookDelivery(OutboxLoop):
    """This process's webhook delivery loop (:class:`~api.engine.outbox_loop.OutboxLoop`)."""

    name = "webhooks"

    def __init__(self, pool: Pool, settings: Settings) -> None:
        super().__init__(pool, settings)
        self._http: httpx.AsyncClient | None = None
        self._purged: float | None = None

    async def start(self) -> None:
        self._http = client(WebhookPolicy.of(self.settings), self.timeout)
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def claim(self, conn: AsyncConnection[Any], limit: int, lease: float) -> list[Any]:
        return await webhooks.claim(conn, limit, lease)

    async def after_pass(self) -> None:
        await self._purge()

    async def deliver(self, row: dict[str, Any]) -> None:
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
