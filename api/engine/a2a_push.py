"""A2A push notifications: every process tells, from the outbox (``api.store.a2a_push``), the
configured receivers of A2A tasks (``api.http.a2a``) that a task reached completed, failed,
canceled or input-required.

- Durable: the outbox is filled from ``runs`` (:func:`~api.store.a2a_push.enqueue`, each pass):
  a task's run that ended is told even when the process that ran it, or this one, was killed
  right after; any replica tells it.
- Sent as run webhooks are (``api.engine.webhooks``): claimed with ``FOR UPDATE SKIP LOCKED``
  and a lease, POSTed through ``api.engine.webhook_send`` (whose transport checks every address
  it connects to, ``api.contract.webhook_url``), retried 1 s, 2 s, 4 s... after a connection
  error, a timeout, 429 or 5xx, ``failed`` after ``webhook_max_attempts`` or another answer. At
  least once across a crash during the POST itself.
- The body is the Task as A2A JSON (``render``: the http layer builds it, the state the run's end
  left); the config's token goes in ``X-A2A-Notification-Token``, its authentication in
  ``Authorization: <scheme> <credentials>``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from psycopg import AsyncConnection

from api.contract.webhook_url import WebhookPolicy
from api.engine.outbox_loop import OutboxLoop, backoff
from api.engine.webhook_send import client, post
from api.platform.database import Pool
from api.platform.db_health import log_failure
from api.platform.settings import Settings
from api.store import a2a_push

logger = logging.getLogger(__name__)

TOKEN_HEADER = "X-A2A-Notification-Token"

Render = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""A claimed notification → the Task to send (None: its thread is gone, nothing to tell)."""


def headers(row: dict[str, Any]) -> dict[str, str]:
    """The config's token and authentication, as headers."""
    out: dict[str, str] = {}
    if row.get("token"):
        out[TOKEN_HEADER] = row["token"]
    auth = row.get("authentication") or {}
    if auth.get("scheme"):
        out["Authorization"] = f"{auth['scheme']} {auth.get('credentials') or ''}".strip()
    return out


class A2aPushDelivery(OutboxLoop):
    """This process's A2A push delivery loop (:class:`~api.engine.outbox_loop.OutboxLoop`)."""

    name = "a2a-push"

    def __init__(self, pool: Pool, settings: Settings, render: Render) -> None:
        super().__init__(pool, settings)
        self.render = render
        self.policy = WebhookPolicy.of(settings)

    async def claim(self, conn: AsyncConnection[Any], limit: int, lease: float) -> list[Any]:
        """Enqueue what ended since the last pass, then claim what is due."""
        await a2a_push.enqueue(conn)
        return await a2a_push.claim(conn, limit, lease)

    async def deliver(self, row: dict[str, Any]) -> None:
        task_id, most = row["task_id"], self.settings.webhook_max_attempts
        try:
            if row["attempts"] > most:  # its last attempt never finished (its process died)
                async with self.pool.connection() as conn:
                    await a2a_push.give_up(conn, row, "its last attempt did not finish")
                return
            task = await self.render(row)
            if task is None:
                async with self.pool.connection() as conn:
                    await a2a_push.give_up(conn, row, "the task's thread is gone")
                return
            # A client per delivery: the headers are this config's (the transport checks the
            # address of every connection, redirects included).
            async with client(self.policy, self.timeout) as http:
                http.headers.update(headers(row))
                result = await post(http, row["url"], orjson.dumps(task), self.timeout)
            async with self.pool.connection() as conn:
                if result.delivered:
                    await a2a_push.delivered(conn, row)
                    logger.info("A2A push of task %s (%s) delivered", task_id, row["state"])
                elif result.retry and row["attempts"] < most:
                    delay = backoff(row["attempts"])
                    await a2a_push.retry_later(conn, row, delay, result.detail)
                else:
                    await a2a_push.give_up(conn, row, result.detail)
                    logger.warning(
                        "A2A push of task %s failed after %d attempt(s): %s",
                        *(task_id, row["attempts"], result.detail),
                    )
        except Exception as err:  # the row's lease expires, and it is sent again
            log_failure(logger, self.pool.health, err, "A2A push of task %s", task_id)
