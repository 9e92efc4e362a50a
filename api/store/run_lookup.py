"""Finding a thread's run by what its metadata holds: a protocol door that names runs by its
own ids (AG-UI's ``runId``, kept in the run's metadata) finds them again on any replica."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from api.store.rows import run_out


async def by_metadata(
    conn: AsyncConnection[Any], thread_id: str, contains: dict[str, Any]
) -> dict[str, Any] | None:
    """The thread's latest run whose metadata contains ``contains`` (JSON containment)."""
    cur = await conn.execute(
        "SELECT * FROM runs WHERE thread_id = %s AND metadata @> %s"
        " ORDER BY created_at DESC LIMIT 1",
        (thread_id, Jsonb(contains)),
    )
    row = await cur.fetchone()
    return run_out(row) if row else None
