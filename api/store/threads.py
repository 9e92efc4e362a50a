"""Threads: rows, status that follows their runs, search."""

from __future__ import annotations

from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from api.platform.serde import to_jsonable
from api.platform.validation import check_metadata
from api.store import thread_ttl
from api.store.rows import thread_out
from api.store.thread_values import VALUES_COLUMNS, state_columns

LAST_RUN = """
    (SELECT jsonb_build_object('run_id', r.run_id, 'status', r.status, 'attempt', r.attempt,
                               'error', r.error, 'lease_expired',
                               r.status = 'running' AND r.lease_until < now())
       FROM runs r WHERE r.thread_id = t.thread_id ORDER BY r.created_at DESC LIMIT 1) AS last_run
"""

TTL = tuple[str, float]
"""A thread's time-to-live: its strategy (``delete`` or ``keep_latest``) and minutes."""
_default_ttl: TTL | None = None


def use_default_ttl(ttl: TTL | None) -> None:
    """The TTL a new thread gets when its request names none (every way a thread is made: a
    create, a copy, a run or a schedule that makes one): the project's ``checkpointer.ttl``,
    set at start-up (``api.runs.thread_ttl``)."""
    global _default_ttl
    _default_ttl = ttl


def _ttl(ttl: TTL | None = None) -> tuple[str | None, float | None]:
    return ttl or _default_ttl or (None, None)


async def create(
    conn: AsyncConnection[Any],
    thread_id: str,
    metadata: dict[str, Any],
    owner: str | None = None,
    ttl: TTL | None = None,
) -> dict[str, Any] | None:
    """Insert a thread (owned by ``owner``: None without authentication; ``ttl``: else the
    default); None when it already exists."""
    cur = await conn.execute(
        "INSERT INTO threads (thread_id, metadata, owner, ttl_strategy, ttl_minutes)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (thread_id) DO NOTHING RETURNING *",
        (thread_id, Jsonb(metadata), owner, *_ttl(ttl)),
    )
    row = await cur.fetchone()
    return thread_out(row) if row else None


async def send_create(
    conn: AsyncConnection[Any], thread_id: str, metadata: dict[str, Any], owner: str | None
) -> None:
    """Insert a thread, its result not read: in a pipelined transaction it goes out with the
    statements after it. A thread of that id committed meanwhile fails it (and its transaction)
    with a unique violation (:func:`is_taken`)."""
    await conn.execute(
        "INSERT INTO threads (thread_id, metadata, owner, ttl_strategy, ttl_minutes)"
        " VALUES (%s, %s, %s, %s, %s)",
        (thread_id, Jsonb(metadata), owner, *_ttl()),
    )


def is_taken(err: BaseException) -> bool:
    """Whether ``err`` is :func:`send_create`'s insert meeting a thread of the same id."""
    return isinstance(err, UniqueViolation) and err.diag.constraint_name == "threads_pkey"


WITHOUT_VALUES = (
    "t.thread_id, t.created_at, t.updated_at, t.metadata, t.status, t.config, t.interrupts,"
    " t.owner, t.ttl_strategy, t.ttl_minutes, t.ttl_pruned_at"
)
"""A thread's columns but its values: what an access check or a run's checks read. A long
conversation's values are its whole message list, and reading them back for a check cost more
than the rest of the request."""
SCALAR_VALUES = (
    "(SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(t.state_values) AS e"
    " WHERE jsonb_typeof(e.value) <> 'array') AS state_values"
)
"""The thread's values without their lists (a conversation's messages): what a run's checks
read of them (``api.project.adapters.RunRequest.thread``)."""
FOR_CHECKS = f"{WITHOUT_VALUES}, {SCALAR_VALUES}"


async def get(
    conn: AsyncConnection[Any],
    thread_id: str,
    *,
    include_ttl: bool = False,
    values: bool | Literal["scalars"] = True,
) -> dict[str, Any] | None:
    """The thread; ``include_ttl``: with its ``ttl`` (when it has one); ``values``: False
    leaves them out (None), ``scalars`` reads them without their lists."""
    columns = "t.*" if values is True else FOR_CHECKS if values == "scalars" else WITHOUT_VALUES
    cur = await conn.execute(
        f"SELECT {columns}, {LAST_RUN} FROM threads t WHERE t.thread_id = %s", (thread_id,)
    )
    row = await cur.fetchone()
    if row is None:
        return None
    return {**thread_out(row), "ttl": thread_ttl.info(row)} if include_ttl else thread_out(row)


async def patch(
    conn: AsyncConnection[Any], thread_id: str, metadata: dict[str, Any], ttl: TTL | None = None
) -> dict[str, Any] | None:
    """Merge ``metadata`` into the thread's (top-level keys replace), set its ``ttl`` (counting
    from now) if given; None when there is no such thread. Raises ValueError, and changes
    nothing, when the merged metadata would be over the limits (``api.platform.validation``)."""
    async with conn.transaction():
        cur = await conn.execute(
            "SELECT metadata FROM threads WHERE thread_id = %s FOR UPDATE", (thread_id,)
        )
        row = await cur.fetchone()
        if row is None:
            return None
        merged = {**(row["metadata"] or {}), **metadata}
        check_metadata(merged)
        cur = await conn.execute(
            "UPDATE threads SET metadata = %s, updated_at = now(),"
            " ttl_strategy = coalesce(%s, ttl_strategy), ttl_minutes = coalesce(%s, ttl_minutes),"
            " ttl_pruned_at = CASE WHEN %s THEN NULL ELSE ttl_pruned_at END"
            " WHERE thread_id = %s RETURNING *",
            (Jsonb(merged), *(ttl or (None, None)), ttl is not None, thread_id),
        )
        row = await cur.fetchone()
    return thread_out(row) if row else None


async def delete(conn: AsyncConnection[Any], thread_id: str) -> bool:
    cur = await conn.execute("DELETE FROM threads WHERE thread_id = %s", (thread_id,))
    return cur.rowcount > 0


SORT_COLUMNS = {
    "thread_id": "t.thread_id",
    "status": "t.status",
    "created_at": "t.created_at",
    "updated_at": "t.updated_at",
    "state_updated_at": "t.updated_at",
}
"""What ``sort_by`` may name (the service keeps no separate state time: ``updated_at``)."""


def _filters(
    status: str | None,
    metadata: dict[str, Any] | None,
    values: dict[str, Any] | None,
    ids: list[str] | None,
    scope: tuple[str, list[Any]],
) -> tuple[str, list[Any]]:
    where, params = scope
    sql = (
        "(%s::text IS NULL OR t.status = %s) AND t.metadata @> %s"
        " AND (%s::jsonb IS NULL OR t.state_values @> %s)"
        " AND (%s::text[] IS NULL OR t.thread_id = ANY(%s))"
        f" AND ({where})"
    )
    vals = Jsonb(values) if values else None
    return sql, [status, status, Jsonb(metadata or {}), vals, vals, ids, ids, *params]


async def search(
    conn: AsyncConnection[Any],
    *,
    status: str | None,
    metadata: dict[str, Any] | None,
    limit: int,
    offset: int,
    scope: tuple[str, list[Any]] = ("TRUE", []),
    values: dict[str, Any] | None = None,
    ids: list[str] | None = None,
    sort_by: str | None = None,
    sort_order: str | None = None,
) -> list[dict[str, Any]]:
    """Filtered by status, metadata and values containment and ``ids``, within the caller's
    ``scope`` (a condition over ``t`` and its parameters: ``api.auth.access.Scope.where``);
    sorted by ``sort_by`` (a key of ``SORT_COLUMNS``, default ``created_at``) in ``sort_order``
    (default ``desc``), ties by thread id."""
    where, params = _filters(status, metadata, values, ids, scope)
    column = SORT_COLUMNS[sort_by or "created_at"]
    order = "ASC" if sort_order == "asc" else "DESC"
    cur = await conn.execute(
        f"SELECT t.*, {LAST_RUN} FROM threads t WHERE {where}"
        f" ORDER BY {column} {order}, t.thread_id {order} LIMIT %s OFFSET %s",
        (*params, limit, offset),
    )
    return [thread_out(r) for r in await cur.fetchall()]


async def count(
    conn: AsyncConnection[Any],
    *,
    status: str | None,
    metadata: dict[str, Any] | None,
    values: dict[str, Any] | None = None,
    scope: tuple[str, list[Any]] = ("TRUE", []),
) -> int:
    """How many threads ``search`` would find without a limit."""
    where, params = _filters(status, metadata, values, None, scope)
    cur = await conn.execute(f"SELECT count(*) AS n FROM threads t WHERE {where}", params)
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def copy(
    conn: AsyncConnection[Any],
    source: str,
    target: str,
    metadata: dict[str, Any],
    owner: str | None,
) -> dict[str, Any] | None:
    """A new thread ``target`` with ``source``'s values, interrupts and status (idle for a busy
    one), ``metadata`` and ``owner``; None when ``target`` exists."""
    cur = await conn.execute(
        "INSERT INTO threads (thread_id, metadata, owner, status, state_values, interrupts,"
        " ttl_strategy, ttl_minutes)"
        " SELECT %s, %s, %s, CASE WHEN status = 'busy' THEN 'idle' ELSE status END,"
        " state_values, interrupts, %s, %s FROM threads WHERE thread_id = %s"
        " ON CONFLICT (thread_id) DO NOTHING RETURNING *",
        (target, Jsonb(metadata), owner, *_ttl(), source),
    )
    row = await cur.fetchone()
    return thread_out(row) if row else None


async def refresh_status(
    conn: AsyncConnection[Any],
    thread_id: str,
    *,
    after: str | None = None,
    values: Any = None,
    interrupts: dict[str, Any] | None = None,
) -> str | None:
    """Set a thread's status from its runs: busy while one is pending or running, else ``after``;
    returns the status set (None: no such thread)."""
    cur = await conn.execute(
        """
        UPDATE threads SET
          status = CASE
            WHEN EXISTS (SELECT 1 FROM runs WHERE thread_id = %(t)s
                         AND status IN ('pending', 'running')) THEN 'busy'
            ELSE coalesce(%(after)s, status) END,
          """
        + VALUES_COLUMNS
        + """,
          updated_at = now()
        WHERE thread_id = %(t)s
        RETURNING status
        """,
        {"t": thread_id, "after": after, **state_columns(values, interrupts)},
    )
    row = await cur.fetchone()
    return str(row["status"]) if row else None


async def refresh_from_state(conn: AsyncConnection[Any], thread_id: str, state: Any) -> None:
    """After a state update: the thread's status, values and interrupts from its new state
    (a ``StateSnapshot``), ``interrupted`` if it waits for an answer, else ``idle``."""
    await refresh_status(
        conn,
        thread_id,
        after="interrupted" if state.interrupts else "idle",
        values=to_jsonable(state.values),
        interrupts=to_jsonable({t.id: list(t.interrupts) for t in state.tasks if t.interrupts}),
    )
