"""Finding the runs a bulk cancel names: active runs within the caller's scope."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection


async def active_runs(
    conn: AsyncConnection[Any],
    *,
    statuses: list[str],
    scope: tuple[str, list[Any]],
    thread_id: str | None = None,
    run_ids: list[str] | None = None,
    limit: int = 1000,
) -> list[tuple[str, str]]:
    """(thread id, run id) of the runs in ``statuses`` whose thread is in ``scope`` (a condition
    over ``t``: ``api.auth.access.Scope.where``), of ``thread_id`` and among ``run_ids`` when
    given, oldest first."""
    where, params = scope
    sql = (
        "SELECT r.thread_id, r.run_id::text AS run_id FROM runs r"
        " JOIN threads t ON t.thread_id = r.thread_id"
        f" WHERE r.status = ANY(%s) AND {where}"
    )
    args: list[Any] = [statuses, *params]
    if thread_id is not None:
        sql += " AND r.thread_id = %s"
        args.append(thread_id)
    if run_ids is not None:
        sql += " AND r.run_id = ANY(%s)"
        args.append([uuid.UUID(r) for r in run_ids])
    cur = await conn.execute(sql + " ORDER BY r.created_at LIMIT %s", (*args, limit))
    return [(str(row["thread_id"]), str(row["run_id"])) for row in await cur.fetchall()]
