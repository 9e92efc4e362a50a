"""Schedules: rows, the owner's view of them, and the due ones a scheduler takes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from api.store.rows import iso

SORTS = {
    "cron_id": "cron_id",
    "assistant_id": "assistant_id",
    "thread_id": "thread_id",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "next_run_date": "next_run_at",
    "end_time": "end_time",
}
VISIBLE = "(%(owner)s::text IS NULL OR owner = %(owner)s)"
"""``owner`` None: every schedule (no authentication); else only that owner's."""


def cron_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "cron_id": str(row["cron_id"]),
        "assistant_id": row["assistant_id"],
        "thread_id": row["thread_id"],
        "on_run_completed": None if row["thread_id"] else row["on_run_completed"],
        "end_time": iso(row["end_time"]),
        "schedule": row["schedule"],
        "timezone": row["timezone"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "payload": row["payload"],
        "user_id": row["user_id"],
        "next_run_date": iso(row["next_run_at"]),
        "metadata": row["metadata"],
        "enabled": row["enabled"],
        "now": iso(row.get("now")),
    }


def _id(cron_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(cron_id)
    except ValueError:
        return None


async def insert(conn: AsyncConnection[Any], **values: Any) -> dict[str, Any]:
    """A new schedule; ``values`` are its columns (payload, kwargs and metadata as JSON)."""
    for key in ("payload", "kwargs", "metadata"):
        values[key] = Jsonb(values[key])
    columns = ", ".join(values)
    cur = await conn.execute(
        f"INSERT INTO crons (cron_id, {columns}) VALUES (%(cron_id)s, "
        + ", ".join(f"%({k})s" for k in values)
        + ") RETURNING *, now()",
        {"cron_id": uuid.uuid4(), **values},
    )
    row = await cur.fetchone()
    assert row is not None
    return cron_out(row)


async def get(conn: AsyncConnection[Any], cron_id: str, owner: str | None) -> dict[str, Any] | None:
    """The row (every column), if ``owner`` may see it."""
    cid = _id(cron_id)
    if cid is None:
        return None
    cur = await conn.execute(
        f"SELECT *, now() FROM crons WHERE cron_id = %(id)s AND {VISIBLE}",
        {"id": cid, "owner": owner},
    )
    return await cur.fetchone()


async def update(conn: AsyncConnection[Any], cron_id: str, **values: Any) -> dict[str, Any]:
    """Set ``values`` (columns) on a schedule ``get`` found."""
    for key in ("payload", "kwargs", "metadata"):
        if key in values:
            values[key] = Jsonb(values[key])
    sets = ", ".join(f"{k} = %({k})s" for k in values)
    cur = await conn.execute(
        f"UPDATE crons SET {sets}, updated_at = now() WHERE cron_id = %(cron_id)s"
        " RETURNING *, now()",
        {**values, "cron_id": uuid.UUID(cron_id)},
    )
    row = await cur.fetchone()
    assert row is not None
    return cron_out(row)


async def delete(conn: AsyncConnection[Any], cron_id: str, owner: str | None) -> bool:
    cid = _id(cron_id)
    if cid is None:
        return False
    cur = await conn.execute(
        f"DELETE FROM crons WHERE cron_id = %(id)s AND {VISIBLE}", {"id": cid, "owner": owner}
    )
    return cur.rowcount > 0


def _where(owner: str | None, filters: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    parts: list[str] = [VISIBLE]
    params: dict[str, Any] = {"owner": owner}
    if filters.get("assistant_id") is not None:  # one of these ids
        parts.append("assistant_id = ANY(%(assistant_id)s)")
        params["assistant_id"] = list(filters["assistant_id"])
    for key in ("thread_id", "enabled"):
        if filters.get(key) is not None:
            parts.append(f"{key} = %({key})s")
            params[key] = filters[key]
    if filters.get("metadata"):
        parts.append("metadata @> %(metadata)s")
        params["metadata"] = Jsonb(filters["metadata"])
    return " AND ".join(parts), params


async def search(
    conn: AsyncConnection[Any],
    owner: str | None,
    filters: dict[str, Any],
    *,
    sort_by: str,
    sort_order: str,
    limit: int,
    offset: int,
) -> list[dict[str, Any]]:
    where, params = _where(owner, filters)
    order = f"{SORTS[sort_by]} {'ASC' if sort_order == 'asc' else 'DESC'} NULLS LAST, cron_id"
    cur = await conn.execute(
        f"SELECT *, now() FROM crons WHERE {where} ORDER BY {order}"
        " LIMIT %(limit)s OFFSET %(offset)s",
        {**params, "limit": limit, "offset": offset},
    )
    return [cron_out(r) for r in await cur.fetchall()]


async def count(conn: AsyncConnection[Any], owner: str | None, filters: dict[str, Any]) -> int:
    where, params = _where(owner, filters)
    cur = await conn.execute(f"SELECT count(*) AS n FROM crons WHERE {where}", params)
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def delete_for_assistant(conn: AsyncConnection[Any], assistant_ids: list[str]) -> int:
    """Delete the schedules of an assistant (``assistant_ids``: the ids they may name it by)."""
    cur = await conn.execute("DELETE FROM crons WHERE assistant_id = ANY(%s)", (assistant_ids,))
    return cur.rowcount


async def lock_due(conn: AsyncConnection[Any], limit: int) -> list[dict[str, Any]]:
    """Due schedules, locked for this transaction; ones another replica holds are skipped (it
    fires them). ``now`` is the database's clock, the one ``next_run_at`` is compared with."""
    cur = await conn.execute(
        "SELECT *, now() FROM crons WHERE enabled AND next_run_at <= now()"
        " ORDER BY next_run_at FOR UPDATE SKIP LOCKED LIMIT %s",
        (limit,),
    )
    return list(await cur.fetchall())


async def advance(conn: AsyncConnection[Any], cron_id: Any, next_run_at: datetime | None) -> None:
    """The schedule's next due time (None: none left)."""
    await conn.execute(
        "UPDATE crons SET next_run_at = %s WHERE cron_id = %s", (next_run_at, cron_id)
    )
