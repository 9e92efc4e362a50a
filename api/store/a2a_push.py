"""A2A push notifications (migration 0013): each task's configs, and the outbox the delivery loop
(``api.engine.a2a_push``) works through.

:func:`enqueue` is how a run's end becomes a notification: it adds a row for every ended run of a
task with a config (ended since the config counts, ``since``) that has none yet, so a run that
ended is told whatever happened to its process; ``UNIQUE (task_id, config_id, run_id)`` keeps it
once. Claims, leases and fences are the run webhooks' (``api.store.webhooks``); a delivered row
stays, marked ``delivered``, as the record that this end was told.
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from api.store.a2a_tasks import OF_TASK, STATE_SQL

_CONFIG_COLUMNS = "task_id, config_id, url, token, authentication"


async def save_config(
    conn: AsyncConnection[Any],
    *,
    task_id: str,
    config_id: str,
    thread_id: str,
    first_run_id: str,
    url: str,
    token: str | None,
    authentication: dict[str, Any] | None,
    since: Any = None,
) -> dict[str, Any]:
    """Create the config, or replace the one of that id (its ``since`` kept)."""
    cur = await conn.execute(
        f"""
        INSERT INTO a2a_push_configs (task_id, config_id, thread_id, first_run_id, url, token,
            authentication, since)
        VALUES (%s, %s, %s, %s, %s, %s, %s, coalesce(%s::timestamptz, now()))
        ON CONFLICT (task_id, config_id) DO UPDATE SET url = excluded.url,
            token = excluded.token, authentication = excluded.authentication
        RETURNING {_CONFIG_COLUMNS}
        """,
        (
            task_id,
            config_id,
            thread_id,
            uuid.UUID(first_run_id),
            url,
            token,
            Jsonb(authentication) if authentication is not None else None,
            since,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return dict(row)


async def configs(
    conn: AsyncConnection[Any], task_id: str, config_id: str | None = None
) -> list[dict[str, Any]]:
    """The task's configs (or the one of ``config_id``), oldest first."""
    cur = await conn.execute(
        f"SELECT {_CONFIG_COLUMNS} FROM a2a_push_configs WHERE task_id = %s"
        " AND (%s::text IS NULL OR config_id = %s) ORDER BY created_at, config_id",
        (task_id, config_id, config_id),
    )
    return [dict(r) for r in await cur.fetchall()]


async def delete_config(conn: AsyncConnection[Any], task_id: str, config_id: str) -> bool:
    cur = await conn.execute(
        "DELETE FROM a2a_push_configs WHERE task_id = %s AND config_id = %s",
        (task_id, config_id),
    )
    return cur.rowcount == 1


async def enqueue(conn: AsyncConnection[Any]) -> int:
    """Add the notification of every ended run of a task with a config that has none yet."""
    of_task = OF_TASK.format(r="r", first="c.first_run_id", task="c.task_id")
    cur = await conn.execute(
        f"""
        INSERT INTO a2a_push_notifications (task_id, config_id, run_id, thread_id, state)
        SELECT c.task_id, c.config_id, r.run_id, c.thread_id, {STATE_SQL.format(r="r")}
        FROM a2a_push_configs c JOIN runs r ON r.thread_id = c.thread_id AND {of_task}
        WHERE r.status NOT IN ('pending', 'running') AND r.updated_at >= c.since
            AND NOT EXISTS (SELECT 1 FROM a2a_push_notifications n WHERE n.task_id = c.task_id
                            AND n.config_id = c.config_id AND n.run_id = r.run_id)
        ON CONFLICT (task_id, config_id, run_id) DO NOTHING
        """
    )
    return cur.rowcount


async def claim(
    conn: AsyncConnection[Any], limit: int, lease_seconds: float
) -> list[dict[str, Any]]:
    """Up to ``limit`` due notifications with their config, each leased for ``lease_seconds``
    with its attempt counted."""
    cur = await conn.execute(
        """
        WITH claimed AS (
            UPDATE a2a_push_notifications n SET attempts = n.attempts + 1, updated_at = now(),
                lease_until = now() + make_interval(secs => %(lease)s)
            FROM (SELECT id FROM a2a_push_notifications
                  WHERE status = 'pending' AND next_attempt_at <= now()
                    AND (lease_until IS NULL OR lease_until <= now())
                  ORDER BY next_attempt_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) due
            WHERE n.id = due.id
            RETURNING n.*)
        SELECT claimed.*, c.url, c.token, c.authentication, c.first_run_id
        FROM claimed JOIN a2a_push_configs c USING (task_id, config_id)
        """,
        {"lease": lease_seconds, "limit": limit},
    )
    return [dict(r) for r in await cur.fetchall()]


async def delivered(conn: AsyncConnection[Any], row: dict[str, Any]) -> bool:
    cur = await conn.execute(
        "UPDATE a2a_push_notifications SET status = 'delivered', lease_until = NULL,"
        " last_error = NULL, updated_at = now() WHERE id = %s AND attempts = %s",
        (row["id"], row["attempts"]),
    )
    return cur.rowcount == 1


async def retry_later(
    conn: AsyncConnection[Any], row: dict[str, Any], delay: float, error: str
) -> bool:
    cur = await conn.execute(
        "UPDATE a2a_push_notifications SET lease_until = NULL, last_error = %s,"
        " updated_at = now(), next_attempt_at = now() + make_interval(secs => %s)"
        " WHERE id = %s AND attempts = %s",
        (error, delay, row["id"], row["attempts"]),
    )
    return cur.rowcount == 1


async def give_up(conn: AsyncConnection[Any], row: dict[str, Any], error: str) -> bool:
    cur = await conn.execute(
        "UPDATE a2a_push_notifications SET status = 'failed', lease_until = NULL,"
        " last_error = %s, updated_at = now() WHERE id = %s AND attempts = %s",
        (error, row["id"], row["attempts"]),
    )
    return cur.rowcount == 1
