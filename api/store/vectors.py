"""SQL of the exact-scan semantic index (:mod:`api.durable.exact_scan`): the vectors of the store's
items in ``threadline_store_vectors`` (migration 0011), one row per embedded field as in
LangGraph's ``store_vectors``, beside LangGraph's own ``store`` table (its items, TTLs).

Scores are LangGraph's with pgvector's cosine distance: an item's score is the best cosine
similarity of its fields' vectors to the query's, clamped to [-1, 1] as pgvector clamps it.
The vectors are ``real[]`` (single precision, as pgvector's ``vector``); products are summed in
double precision, so scores agree with pgvector's to about 1e-6. A vector of zero length has no
score (pgvector's is NaN) and comes last.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

Conn = AsyncConnection[Any]
VectorRow = tuple[str, str, str, list[float]]
"""``(prefix, key, field_name, embedding)``: ``prefix`` is the namespace joined with dots."""

UPSERT = """
INSERT INTO threadline_store_vectors (prefix, key, field_name, embedding, norm)
SELECT %s, %s, %s, e, sqrt((SELECT sum(x::float8 * x::float8) FROM unnest(e) AS x))
FROM (SELECT %s::real[] AS e) AS given
ON CONFLICT (prefix, key, field_name) DO UPDATE
SET embedding = EXCLUDED.embedding, norm = EXCLUDED.norm, updated_at = now()
"""

SCAN = """
WITH query AS (
    SELECT q, sqrt((SELECT sum(x::float8 * x::float8) FROM unnest(q) AS x)) AS norm
    FROM (SELECT %s::real[] AS q) AS given
), scored AS (
    SELECT sv.prefix, sv.key, max(
        (SELECT sum(a::float8 * b::float8) FROM unnest(sv.embedding, query.q) AS t(a, b))
        / NULLIF(sv.norm * query.norm, 0)
    ) AS score
    FROM store s
    JOIN threadline_store_vectors sv ON sv.prefix = s.prefix AND sv.key = s.key
    CROSS JOIN query
    WHERE cardinality(sv.embedding) = cardinality(query.q) {conditions}
    GROUP BY sv.prefix, sv.key
)
SELECT s.prefix, s.key, s.value, s.created_at, s.updated_at,
    LEAST(1.0, GREATEST(-1.0, scored.score)) AS score
FROM scored JOIN store s ON s.prefix = scored.prefix AND s.key = scored.key
ORDER BY score DESC NULLS LAST, s.prefix, s.key
LIMIT %s OFFSET %s
"""

MOVE_VECTOR = """
WITH moved AS (
    DELETE FROM threadline_store_vectors RETURNING prefix, key, field_name, embedding
)
INSERT INTO store_vectors (prefix, key, field_name, embedding)
SELECT m.prefix, m.key, m.field_name, m.embedding::vector FROM moved m
JOIN store s ON s.prefix = m.prefix AND s.key = m.key
WHERE cardinality(m.embedding) = %s
ON CONFLICT (prefix, key, field_name) DO NOTHING
"""
MOVE_HALFVEC = MOVE_VECTOR.replace("::vector", "::halfvec")

COMPARISONS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


async def upsert(conn: Conn, rows: Sequence[VectorRow]) -> None:
    """Store (or replace) these fields' vectors."""
    if rows:
        async with conn.cursor() as cur:
            await cur.executemany(UPSERT, [(p, k, f, list(e)) for p, k, f, e in rows])


async def delete(conn: Conn, items: Sequence[tuple[str, str]]) -> None:
    """Forget the vectors of these ``(prefix, key)`` items (deleted from the store)."""
    if items:
        await conn.execute(
            "DELETE FROM threadline_store_vectors WHERE (prefix, key) IN"
            " (SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([p for p, _ in items], [k for _, k in items]),
        )


async def drop_orphans(conn: Conn) -> int:
    """Forget the vectors of items the store no longer has (the TTL sweeper deleted them)."""
    cur = await conn.execute(
        "DELETE FROM threadline_store_vectors sv WHERE NOT EXISTS"
        " (SELECT 1 FROM store s WHERE s.prefix = sv.prefix AND s.key = sv.key)"
    )
    return cur.rowcount


async def move_to_pgvector(conn: Conn, dims: int, *, halfvec: bool = False) -> int:
    """Hand the vectors kept here to LangGraph's pgvector table (``store_vectors``, made by its
    ``setup()``), once the database has pgvector: items embedded by the exact scan stay found.
    Vectors of another length (an earlier ``dims``) or of deleted items are dropped."""
    cur = await conn.execute(MOVE_HALFVEC if halfvec else MOVE_VECTOR, (dims,))
    return cur.rowcount


async def scan(
    conn: Conn,
    query: list[float],
    *,
    namespace_prefix: tuple[str, ...],
    filter: dict[str, Any] | None,
    limit: int,
    offset: int,
    omit_expired: bool = False,
) -> list[dict[str, Any]]:
    """Every vector under ``namespace_prefix`` of an item matching ``filter``, scored against
    ``query``: the best ``limit`` items after ``offset``, best first, with their ``score``."""
    conditions: list[str] = []
    params: list[Any] = [query]
    if namespace_prefix:
        path = ".".join(namespace_prefix)
        conditions.append(r"(s.prefix = %s OR s.prefix LIKE %s ESCAPE '\')")
        params += [path, f"{_escape_like(path)}.%"]
    for clause, values in _filter_conditions(filter or {}):
        conditions.append(clause)
        params += values
    if omit_expired:
        conditions.append("(s.expires_at IS NULL OR s.expires_at > now())")
    sql = SCAN.format(conditions="".join(f" AND {c}" for c in conditions))
    cur = await conn.execute(sql.encode(), [*params, limit, offset])
    return list(await cur.fetchall())


def _filter_conditions(flt: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """LangGraph's ``filter`` in SQL, as its PostgreSQL store writes it (top-level fields of
    the value; ``$gt`` and the like compare the field's text)."""
    out: list[tuple[str, list[Any]]] = []
    for field, cond in flt.items():
        if not isinstance(cond, dict):
            out.append(("s.value->%s = %s::jsonb", [field, json.dumps(cond)]))
            continue
        for op, value in cond.items():
            if op == "$eq":
                out.append(("s.value->%s = %s::jsonb", [field, json.dumps(value)]))
            elif op == "$ne":
                out.append(("s.value->%s != %s::jsonb", [field, json.dumps(value)]))
            elif op in COMPARISONS:
                out.append((f"s.value->>%s {COMPARISONS[op]} %s", [field, str(value)]))
            else:
                raise ValueError(f"Unsupported operator: {op}")
    return out


def _escape_like(text: str) -> str:
    """``text`` matched literally by ``LIKE ... ESCAPE '\\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
