"""A2A tasks as rows (``api.http.a2a``): a task is the runs of one thread that its first run
started (metadata ``{"a2a": {"task_start": true}}``) and those that continued it: an A2A
answer (metadata ``{"a2a": {"task_id": "<thread_id>:<first run id>"}}``), or any resume
(``command.resume``) after the task's runs with no other run between — its interrupts are
answered once through any door (the approvals API, a LangGraph API run, AG-UI, MCP), and the
task follows the run that answered them. Its state is its latest run's.

Its state is computed here, the same way everywhere (:data:`STATE_SQL`): pending → submitted,
running → working, error and timeout → failed, interrupted (LangGraph's status of a cancelled run)
→ canceled, success → input-required when the run stopped at an interrupt (its thread has
pending interrupts and no run came after it on the thread), else completed.
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection

from api.store.rows import run_out

STATE_SQL = """CASE {r}.status
    WHEN 'pending' THEN 'submitted' WHEN 'running' THEN 'working'
    WHEN 'interrupted' THEN 'canceled' WHEN 'success' THEN
        CASE WHEN EXISTS (SELECT 1 FROM threads st WHERE st.thread_id = {r}.thread_id
                          AND st.interrupts <> '{{}}'::jsonb)
              AND NOT EXISTS (SELECT 1 FROM runs sr WHERE sr.thread_id = {r}.thread_id
                              AND sr.created_at > {r}.created_at)
        THEN 'input-required' ELSE 'completed' END
    ELSE 'failed' END"""
"""The A2A state a run leaves its task in (``{r}``: the run's alias)."""

OF_TASK = """({r}.run_id = {first} OR {r}.metadata->'a2a'->>'task_id' = {task}
    OR ({r}.kwargs->'command'->'resume' IS NOT NULL
        AND (SELECT h.run_id FROM runs h WHERE h.thread_id = {r}.thread_id
             AND (h.created_at, h.run_id) < ({r}.created_at, {r}.run_id)
             AND h.kwargs->'command'->'resume' IS NULL
             ORDER BY h.created_at DESC, h.run_id DESC LIMIT 1) = {first}))"""
"""Whether the run ``{r}`` is one of the task's (its first run's id, its id): the first run, an A2A
answer, or a resume whose latest earlier run that is no resume is the first run (the interrupts a
resume answers were raised by the thread's latest run; a run that is no resume starts anew)."""


async def task_runs(
    conn: AsyncConnection[Any], thread_id: str, first_run_id: str
) -> list[dict[str, Any]]:
    """The task's runs, oldest first (none: no such first run on the thread)."""
    try:
        first = uuid.UUID(first_run_id)
    except ValueError:
        return []
    where = OF_TASK.format(r="r", first="%(first)s", task="%(task)s")
    cur = await conn.execute(
        f"SELECT r.*, {STATE_SQL.format(r='r')} AS a2a_state FROM runs r"
        f" WHERE r.thread_id = %(thread)s AND {where}"
        " ORDER BY r.created_at, r.run_id",
        {"thread": thread_id, "first": first, "task": f"{thread_id}:{first}"},
    )
    return [{**run_out(row), "a2a_state": row["a2a_state"]} for row in await cur.fetchall()]


async def listed(
    conn: AsyncConnection[Any],
    *,
    assistant_id: str,
    scope: tuple[str, list[Any]],
    context_id: str | None,
    state: str | None,
    updated_after: Any,
    limit: int,
    offset: int,
) -> tuple[list[dict[str, Any]], int]:
    """A page of the assistant's tasks on threads in ``scope`` (``Scope.where("t")``), latest
    change first: rows of ``thread_id``, ``first_run_id``, ``state``; and how many there are."""
    scope_sql, scope_params = scope
    of_task = OF_TASK.format(r="r", first="f.run_id", task="f.thread_id || ':' || f.run_id")
    sql = f"""
        SELECT * FROM (
            SELECT f.thread_id, f.run_id AS first_run_id, l.updated_at,
                {STATE_SQL.format(r="l")} AS state
            FROM runs f JOIN threads t ON t.thread_id = f.thread_id
            CROSS JOIN LATERAL (
                SELECT r.run_id, r.thread_id, r.status, r.created_at, r.updated_at FROM runs r
                WHERE r.thread_id = f.thread_id AND {of_task}
                ORDER BY r.created_at DESC, r.run_id DESC LIMIT 1) l
            WHERE f.metadata->'a2a'->>'task_start' = 'true' AND f.assistant_id = %s
                AND ({scope_sql})
                AND (%s::text IS NULL OR f.thread_id = %s)
                AND (%s::timestamptz IS NULL OR l.updated_at > %s)
        ) tasks
        WHERE (%s::text IS NULL OR state = %s)
        ORDER BY updated_at DESC, first_run_id DESC
    """
    params = [
        assistant_id,
        *scope_params,
        context_id,
        context_id,
        updated_after,
        updated_after,
        state,
        state,
    ]
    count = await conn.execute(f"SELECT count(*) AS n FROM ({sql}) c", params)
    total_row = await count.fetchone()
    cur = await conn.execute(f"{sql} LIMIT %s OFFSET %s", [*params, limit, offset])
    rows = [{**row, "first_run_id": str(row["first_run_id"])} for row in await cur.fetchall()]
    return rows, int(total_row["n"]) if total_row else 0


async def run_state(conn: AsyncConnection[Any], run_id: str) -> str | None:
    """The A2A state the run leaves its task in now (None: no such run)."""
    cur = await conn.execute(
        f"SELECT {STATE_SQL.format(r='r')} AS state FROM runs r WHERE r.run_id = %s",
        (uuid.UUID(run_id),),
    )
    row = await cur.fetchone()
    return str(row["state"]) if row else None
