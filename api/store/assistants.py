"""Assistants and their versions: rows, the versions an update adds, the defaults of the served
graphs. Who may see which is the caller's :class:`Visible` (``api.runs.assistant_access``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, AsyncCursor
from psycopg.types.json import Jsonb

from api.store.filters import Filter, matches, to_sql
from api.store.rows import iso

VALUES = ("graph_id", "name", "description", "config", "context", "metadata")
"""What a version holds (and the assistant, as of the version it is at)."""
JSON = ("config", "context", "metadata")


def assistant_out(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the API's ``Assistant``."""
    return {**version_out(row), "updated_at": iso(row["updated_at"])}


def version_out(row: dict[str, Any]) -> dict[str, Any]:
    """A version (or an assistant's row) as the API's ``AssistantVersion``."""
    return {
        "assistant_id": str(row["assistant_id"]),
        "version": row["version"],
        **{k: row[k] for k in VALUES},
        "created_at": iso(row["created_at"]),
    }


@dataclass(frozen=True)
class Visible:
    """Which assistants one caller may act on: ``owner``'s (None: anyone's), the served graphs'
    defaults too when ``shared``, and those whose metadata passes ``flt``."""

    owner: str | None = None
    shared: bool = True
    flt: Filter | None = None

    def allows(self, row: dict[str, Any]) -> bool:
        """Whether the row (as :func:`get` reads it) is one of them."""
        mine = self.owner is None or row["owner"] == self.owner
        if not (mine or (self.shared and row["system"])):
            return False
        return matches(self.flt, row["metadata"])

    def where(self, alias: str = "a") -> tuple[str, list[Any]]:
        sql, params = to_sql(self.flt, f"{alias}.metadata")
        if self.owner is not None:
            mine = f"{alias}.owner = %s" + (f" OR {alias}.system" if self.shared else "")
            return f"({mine}) AND {sql}", [self.owner, *params]
        return sql, params


def as_uuid(assistant_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(assistant_id)
    except ValueError:
        return None


def _json(values: dict[str, Any]) -> dict[str, Any]:
    return {k: Jsonb(v) if k in JSON else v for k, v in values.items()}


async def insert(
    conn: AsyncConnection[Any],
    assistant_id: uuid.UUID,
    values: dict[str, Any],
    *,
    owner: str | None,
    system: bool = False,
) -> dict[str, Any] | None:
    """A new assistant at version 1 (``values``: :data:`VALUES`); None when the id is taken."""
    cur = await conn.execute(
        "WITH ins AS (INSERT INTO assistants (assistant_id, owner, system, "
        + ", ".join(VALUES)
        + ") VALUES (%(id)s, %(owner)s, %(system)s, "
        + ", ".join(f"%({k})s" for k in VALUES)
        + ") ON CONFLICT (assistant_id) DO NOTHING RETURNING *),"
        " v AS (INSERT INTO assistant_versions (assistant_id, version, created_at, "
        + ", ".join(VALUES)
        + ") SELECT assistant_id, 1, created_at, "
        + ", ".join(VALUES)
        + " FROM ins) SELECT * FROM ins",
        {"id": assistant_id, "owner": owner, "system": system, **_json(values)},
    )
    return await cur.fetchone()


async def ensure_default(
    conn: AsyncConnection[Any], assistant_id: uuid.UUID, values: dict[str, Any]
) -> bool:
    """A served graph's default assistant, created once across replicas starting together; one
    that exists keeps its config, and is renamed (a new version, as LangGraph Server patches it)
    when the graph's name or its ``langgraph.json`` description changed. False: the id is taken
    by an assistant that is not a default (left as it is)."""
    async with conn.transaction():
        if await insert(conn, assistant_id, values, owner=None, system=True) is not None:
            return True
        row = await get(conn, assistant_id, lock=True)
        if row is not None and not row["system"]:
            return False
        named = {k: values[k] for k in ("name", "description")}
        if row is not None and any(row[k] != v for k, v in named.items()):
            kept = {k: row[k] for k in VALUES}
            await add_version(conn, assistant_id, {**kept, **named})
        return True


async def get(
    conn: AsyncConnection[Any], assistant_id: uuid.UUID, *, lock: bool = False
) -> dict[str, Any] | None:
    """The row (owner and all); ``lock``: locked until the transaction ends."""
    cur = await send_get(conn, assistant_id, lock=lock)
    return await cur.fetchone()


async def send_get(
    conn: AsyncConnection[Any], assistant_id: uuid.UUID, *, lock: bool = False
) -> AsyncCursor[Any]:
    """:func:`get`, its row not read yet: in a pipeline it goes out with what follows."""
    return await conn.execute(
        "SELECT * FROM assistants WHERE assistant_id = %s" + (" FOR UPDATE" if lock else ""),
        (assistant_id,),
    )


async def add_version(
    conn: AsyncConnection[Any], assistant_id: uuid.UUID, values: dict[str, Any]
) -> dict[str, Any]:
    """A new version (the highest so far plus one) with ``values``, which the assistant is at
    from now on; call with its row locked (:func:`get` with ``lock``)."""
    cur = await conn.execute(
        "WITH v AS (INSERT INTO assistant_versions (assistant_id, version, "
        + ", ".join(VALUES)
        + ") SELECT %(id)s, coalesce(max(version), 0) + 1, "
        + ", ".join(f"%({k})s" for k in VALUES)
        + " FROM assistant_versions WHERE assistant_id = %(id)s RETURNING *)"
        " UPDATE assistants a SET "
        + ", ".join(f"{k} = v.{k}" for k in VALUES)
        + ", version = v.version, updated_at = v.created_at"
        " FROM v WHERE a.assistant_id = v.assistant_id RETURNING a.*",
        {"id": assistant_id, **_json(values)},
    )
    row: dict[str, Any] | None = await cur.fetchone()
    assert row is not None
    return row


async def set_latest(
    conn: AsyncConnection[Any], assistant_id: uuid.UUID, version: int
) -> dict[str, Any] | None:
    """Put the assistant back at one of its versions; None when it has no such version."""
    cur = await conn.execute(
        "UPDATE assistants a SET "
        + ", ".join(f"{k} = v.{k}" for k in VALUES)
        + ", version = v.version, updated_at = now() FROM assistant_versions v"
        " WHERE a.assistant_id = %s AND v.assistant_id = a.assistant_id AND v.version = %s"
        " RETURNING a.*",
        (assistant_id, version),
    )
    return await cur.fetchone()


async def delete(conn: AsyncConnection[Any], assistant_id: uuid.UUID) -> bool:
    """Delete the assistant and its versions."""
    cur = await conn.execute("DELETE FROM assistants WHERE assistant_id = %s", (assistant_id,))
    return cur.rowcount > 0


async def versions(
    conn: AsyncConnection[Any],
    assistant_id: uuid.UUID,
    metadata: dict[str, Any],
    limit: int,
    offset: int,
) -> list[dict[str, Any]]:
    """Its versions whose metadata contains ``metadata``, newest first."""
    cur = await conn.execute(
        "SELECT * FROM assistant_versions WHERE assistant_id = %s AND metadata @> %s"
        " ORDER BY version DESC LIMIT %s OFFSET %s",
        (assistant_id, Jsonb(metadata), limit, offset),
    )
    return [version_out(r) for r in await cur.fetchall()]


SORTS = {
    "assistant_id": "a.assistant_id",
    "graph_id": "lower(a.graph_id)",
    "name": "lower(a.name)",
    "created_at": "a.created_at",
    "updated_at": "a.updated_at",
}
"""What ``sort_by`` may name; names and graph ids sort without case, as on LangGraph Server."""


def _filters(
    visible: Visible, graphs: Sequence[str], filters: dict[str, Any]
) -> tuple[str, list[Any]]:
    """Visible assistants of the served graphs, filtered by graph, name (a case-insensitive
    substring) and metadata (containment)."""
    where, params = visible.where("a")
    sql = (
        f"({where}) AND a.graph_id = ANY(%s) AND (%s::text IS NULL OR a.graph_id = %s)"
        " AND (%s::text IS NULL OR strpos(lower(a.name), lower(%s)) > 0) AND a.metadata @> %s"
    )
    graph, name = filters.get("graph_id"), filters.get("name") or None
    metadata = Jsonb(filters.get("metadata") or {})
    return sql, [*params, list(graphs), graph, graph, name, name, metadata]


async def search(
    conn: AsyncConnection[Any],
    visible: Visible,
    graphs: Sequence[str],
    filters: dict[str, Any],
    *,
    sort_by: str,
    descending: bool,
    limit: int,
    offset: int,
) -> list[dict[str, Any]]:
    """Up to ``limit`` + 1 matches (one more tells whether there is a next page)."""
    where, params = _filters(visible, graphs, filters)
    order = "DESC" if descending else "ASC"
    cur = await conn.execute(
        f"SELECT a.* FROM assistants a WHERE {where}"
        f" ORDER BY {SORTS[sort_by]} {order}, a.assistant_id {order} LIMIT %s OFFSET %s",
        [*params, limit + 1, offset],
    )
    return [assistant_out(r) for r in await cur.fetchall()]


async def count(
    conn: AsyncConnection[Any], visible: Visible, graphs: Sequence[str], filters: dict[str, Any]
) -> int:
    where, params = _filters(visible, graphs, filters)
    cur = await conn.execute(f"SELECT count(*) AS n FROM assistants a WHERE {where}", params)
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def active_runs(conn: AsyncConnection[Any], assistant_ids: list[str]) -> list[dict[str, Any]]:
    """The pending and running runs created with the assistant (``assistant_ids``: the ids
    they may name it by), as (thread_id, run_id)."""
    cur = await conn.execute(
        "SELECT thread_id, run_id FROM runs WHERE assistant_id = ANY(%s)"
        " AND status IN ('pending', 'running')",
        (assistant_ids,),
    )
    return [{"thread_id": r["thread_id"], "run_id": str(r["run_id"])} for r in await cur.fetchall()]


async def labelled_threads(conn: AsyncConnection[Any], assistant_id: str) -> list[str]:
    """The threads whose metadata names the assistant (its runs label them)."""
    label = Jsonb({"assistant_id": assistant_id})
    cur = await conn.execute("SELECT thread_id FROM threads WHERE metadata @> %s", (label,))
    return [r["thread_id"] for r in await cur.fetchall()]
