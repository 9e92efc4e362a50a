"""The webhook outbox (``webhooks``, migration 0010): the row a run's end adds in the statement
that ends it, and what each replica's delivery loop (``api.engine.webhooks``) does with the rows.

A delivery holds its row by a lease: :func:`claim` counts the attempt and leases the row in one
statement (rows another replica is claiming are skipped, ``FOR UPDATE SKIP LOCKED``; rows it
holds are not due), and the attempt's outcome is recorded only while the row's ``attempts`` is
still the claimed one (a slower replica whose lease ran out changes nothing).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from api.store.rows import storable

OUTBOX_CTE = """
hooked AS (
    INSERT INTO webhooks (run_id, url, run, outcome, run_started_at)
    SELECT f.run_id, f.kwargs->>'webhook', to_jsonb(f), %(hook)s::jsonb,
        coalesce((SELECT e.created_at FROM run_events e
                  WHERE e.run_id = f.run_id AND e.attempt = f.attempt
                  ORDER BY e.seq LIMIT 1), now())
    FROM finished f
    WHERE coalesce(f.kwargs->>'webhook', '') <> ''
    ON CONFLICT (run_id) DO NOTHING)"""
"""A ``WITH`` clause for the statement that ends a run (``api.store.run_end``), after its
``finished`` clause (the run's updated row): a run with a webhook gets its outbox row with
its end. Its start is its attempt's first stored event (``now()``: all in this statement)."""


def outbox_params(outcome: dict[str, Any] | None) -> dict[str, Any]:
    """``hook``: what the run's end adds to its webhook's payload
    (``api.engine.webhook_payload``)."""
    return {"hook": Jsonb(storable(outcome)) if outcome is not None else None}


async def claim(
    conn: AsyncConnection[Any], limit: int, lease_seconds: float
) -> list[dict[str, Any]]:
    """Up to ``limit`` due webhooks, each leased for ``lease_seconds`` with its attempt counted."""
    cur = await conn.execute(
        """
        UPDATE webhooks w SET attempts = w.attempts + 1, updated_at = now(),
            lease_until = now() + make_interval(secs => %(lease)s)
        FROM (SELECT id FROM webhooks
              WHERE status = 'pending' AND next_attempt_at <= now()
                AND (lease_until IS NULL OR lease_until <= now())
              ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) due
        WHERE w.id = due.id
        RETURNING w.*
        """,
        {"lease": lease_seconds, "limit": limit},
    )
    return list(await cur.fetchall())


async def delivered(conn: AsyncConnection[Any], row: dict[str, Any]) -> bool:
    """Delivered: the row goes (False: another replica holds it now)."""
    cur = await conn.execute(
        "DELETE FROM webhooks WHERE id = %s AND attempts = %s", (row["id"], row["attempts"])
    )
    return cur.rowcount == 1


async def retry_later(
    conn: AsyncConnection[Any], row: dict[str, Any], delay: float, error: str
) -> bool:
    """Not delivered: due again in ``delay`` seconds."""
    cur = await conn.execute(
        "UPDATE webhooks SET lease_until = NULL, last_error = %s, updated_at = now(),"
        " next_attempt_at = now() + make_interval(secs => %s)"
        " WHERE id = %s AND attempts = %s",
        (error, delay, row["id"], row["attempts"]),
    )
    return cur.rowcount == 1


async def give_up(conn: AsyncConnection[Any], row: dict[str, Any], error: str) -> bool:
    """Not delivered, and not to be retried: kept as ``failed``."""
    cur = await conn.execute(
        "UPDATE webhooks SET status = 'failed', lease_until = NULL, last_error = %s,"
        " updated_at = now() WHERE id = %s AND attempts = %s",
        (error, row["id"], row["attempts"]),
    )
    return cur.rowcount == 1


async def purge_failed(conn: AsyncConnection[Any], days: float) -> int:
    """Forget failed webhooks older than ``days``."""
    cur = await conn.execute(
        "DELETE FROM webhooks WHERE status = 'failed'"
        " AND updated_at < now() - make_interval(secs => %s)",
        (days * 86400,),
    )
    return cur.rowcount
