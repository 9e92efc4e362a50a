"""Semantic search of the long-term memory store where PostgreSQL has no pgvector: LangGraph's
``AsyncPostgresStore`` (without an index) keeps the items, their TTLs, filters and namespaces;
this subclass adds the index through the store's public interface (``abatch``, ``setup``,
``sweep_ttl``), its vectors in a table of its own (:mod:`api.store.vectors`).

- A put embeds the item's fields (``store.index.fields``, or the put's ``index`` list; none for
  ``index=False``) as LangGraph's store does (``get_text_at_path``; a path that finds several
  texts gives ``path.0``, ``path.1``, ...), before anything is written, then stores the item
  through LangGraph's store and its vectors beside it. An item's earlier vectors stay until it
  is deleted, as in LangGraph's ``store_vectors`` (a put with ``index=False`` keeps them).
- A search with ``query`` scores every vector under the namespace prefix, of items that match
  the filter, exactly (cosine similarity computed in SQL; :mod:`api.store.vectors`): the same
  items, order and scores as LangGraph's pgvector search, within float tolerance, and never the
  approximate answer an ANN index can give (nor LangGraph's short pages past a large
  ``offset``). ``refresh_ttl`` refreshes the items found (a ``get`` with ``refresh_ttl``,
  LangGraph's own statement). An item without vectors is not found by a query, as with pgvector.
- A delete forgets the item's vectors; the TTL sweep forgets those of the items it deleted.

Its limit: each query reads every vector under its namespace prefix. Measured on PostgreSQL 15
(a shared two-core machine): 5 to 8 million vector components per second, i.e. about 3,000
items of 1536 dimensions (OpenAI's text-embedding-3-small) or 75,000 of 64 per second of query
time. A search over a few thousand items stays under a second; for more, install pgvector
(``CREATE EXTENSION vector``), which the server then uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    GetOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.postgres.aio import AsyncPostgresStore

from api.platform.database import Pool
from api.project.store_config import IndexSpec
from api.store import vectors

SCAN_RATE = 5_000_000
"""Vector components the exact scan scores per second of query time (measured, see above)."""

Paths = list[tuple[str, Any]]
"""``(path as written, its tokens)``; the tokens of ``"$"`` are ``"$"`` (the whole value)."""


class ExactScanStore(AsyncPostgresStore):
    """LangGraph's store with ``index``, its vectors scored exactly by PostgreSQL."""

    def __init__(self, pool: Pool, *, index: IndexSpec, ttl: TTLConfig | None = None) -> None:
        super().__init__(pool, ttl=ttl)
        self.pool = pool
        self.spec = index
        self.paths: Paths = [(f, "$" if f == "$" else tokenize_path(f)) for f in index.fields]

    async def setup(self) -> None:
        await super().setup()
        async with self.pool.connection() as conn:
            await vectors.drop_orphans(conn)  # of items deleted while nothing swept them

    async def sweep_ttl(self) -> int:
        swept = await super().sweep_ttl()
        if swept:
            async with self.pool.connection() as conn:
                await vectors.drop_orphans(conn)
        return swept

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:  # as LangGraph's own batch checks them, searches by meaning included
            validate_op_namespace(op)
        scans = [(i, op) for i, op in enumerate(ops) if isinstance(op, SearchOp) and op.query]
        writes = _last_writes(op for op in ops if isinstance(op, PutOp))
        texts = [t for op in writes if op.value is not None for t in self._texts(op)]
        # Embedded before anything is written: a failing embedder leaves the store as it was.
        embeddings = self.spec.embeddings
        found = await embeddings.aembed_documents([t[3] for t in texts]) if texts else []
        asked = [op.query or "" for _, op in scans]
        queries = await embeddings.aembed_documents(asked) if asked else []

        results: list[Result] = [None] * len(ops)
        refresh: list[Op] = []
        if scans:
            async with self.pool.connection() as conn:
                for (i, op), query in zip(scans, queries, strict=True):
                    scored = await vectors.scan(
                        conn,
                        query,
                        namespace_prefix=op.namespace_prefix,
                        filter=op.filter,
                        limit=op.limit,
                        offset=op.offset,
                        omit_expired=bool(self.ttl_config and self.ttl_config.get("omit_expired")),
                    )
                    items = [_search_item(row) for row in scored]
                    results[i] = items
                    if op.refresh_ttl:
                        refresh += [GetOp(it.namespace, it.key, refresh_ttl=True) for it in items]
        scanned = {i for i, _ in scans}
        rest = [i for i in range(len(ops)) if i not in scanned]
        if rest or refresh:
            done = await super().abatch([ops[i] for i in rest] + refresh)
            for i, result in zip(rest, done, strict=False):
                results[i] = result
        if writes:
            rows = [(p, k, f, vector) for (p, k, f, _), vector in zip(texts, found, strict=True)]
            gone = [(".".join(op.namespace), op.key) for op in writes if op.value is None]
            async with self.pool.connection() as conn:
                await vectors.delete(conn, gone)
                await vectors.upsert(conn, rows)
        return results

    def _texts(self, op: PutOp) -> list[tuple[str, str, str, str]]:
        """``(prefix, key, field name, text)`` to embed for a put, as LangGraph's store reads
        them (``PostgresStore._prepare_batch_PUT_queries``)."""
        if op.index is False or op.value is None:
            return []
        paths = self.paths if op.index is None else [(p, tokenize_path(p)) for p in op.index]
        prefix = ".".join(op.namespace)
        out = []
        for path, tokens in paths:
            found = get_text_at_path(op.value, tokens)
            for n, text in enumerate(found):
                out.append((prefix, op.key, f"{path}.{n}" if len(found) > 1 else path, text))
        return out


def _last_writes(puts: Iterable[PutOp]) -> list[PutOp]:
    """The last put (or delete) of each item: what the batch leaves (LangGraph dedups so)."""
    last: dict[tuple[tuple[str, ...], str], PutOp] = {}
    for op in puts:
        last[(op.namespace, op.key)] = op
    return list(last.values())


def _search_item(row: dict[str, Any]) -> SearchItem:
    score = row["score"]
    return SearchItem(
        namespace=tuple(row["prefix"].split(".")),
        key=row["key"],
        value=row["value"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        score=float(score) if score is not None else None,
    )
