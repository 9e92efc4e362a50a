"""The audit log: tool executions and decisions; and the one-decision-per-interrupt record."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from api.store.rows import storable


@dataclass(frozen=True)
class ToolRecord:
    """One executed tool call, as the audit log stores it."""

    tool: str
    tool_call_id: str
    args: Any
    ok: bool
    duration: float
    output: str
    """What the log shows (the first 500 characters are kept)."""
    result: str | None
    """The whole (capped) result: a re-run of the call after a crash returns it."""
    actor: str = "agent"
    """Whom the log names: the agent, or the caller who asked for the call directly."""


@dataclass(frozen=True)
class PriorResult:
    """The recorded result of a call that already executed."""

    ok: bool
    content: str
    duration: float


async def record_decision(
    conn: AsyncConnection[Any],
    thread_id: str,
    interrupt_id: str,
    decision: Any,
    run_id: str,
    actor: str,
    via: str = "http",
) -> bool:
    """Record the answer to an interrupt; False when it was already answered. ``via``: the
    protocol the answer came through (``http``, ``a2a``, ``ag-ui``, ``mcp``)."""
    cur = await conn.execute(
        "INSERT INTO approvals (thread_id, interrupt_id, decision, run_id, actor)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
        (thread_id, interrupt_id, Jsonb(decision), uuid.UUID(run_id), actor),
    )
    if await cur.fetchone() is None:  # read, not ``rowcount``: in pipeline mode that is unknown
        return False
    await conn.execute(
        "INSERT INTO audit_log (thread_id, run_id, kind, detail, actor)"
        " VALUES (%s, %s, 'decision', %s, %s)",
        (
            thread_id,
            uuid.UUID(run_id),
            Jsonb({"interrupt_id": interrupt_id, "answer": decision, "via": via}),
            actor,
        ),
    )
    return True


async def record_tool(
    conn: AsyncConnection[Any],
    *,
    thread_id: str,
    run_id: str,
    attempt: int,
    record: ToolRecord,
) -> None:
    """Record one finished tool execution of a run, named for ``record.actor`` (the agent, or
    the caller who asked for the call directly)."""
    await conn.execute(
        "INSERT INTO audit_log (thread_id, run_id, kind, tool, tool_call_id, idempotency_key,"
        " attempt, detail, actor) VALUES (%s, %s, 'tool', %s, %s, %s, %s, %s, %s)",
        (
            thread_id,
            uuid.UUID(run_id),
            record.tool,
            record.tool_call_id,
            f"{thread_id}:{record.tool_call_id}",
            attempt,
            Jsonb(
                storable(
                    {
                        "args": record.args,
                        "ok": record.ok,
                        "duration": record.duration,
                        "output": record.output[:500],
                        # The whole result (already capped by the tool): a re-run of the call after
                        # a crash returns it instead of executing again.
                        "result": record.result,
                    }
                )
            ),
            record.actor,
        ),
    )


async def record_direct_tool(
    conn: AsyncConnection[Any], *, thread_id: str, record: ToolRecord, actor: str, via: str
) -> None:
    """Record a tool execution outside any run (``via``: how it came, e.g. ``mcp``), named for
    the caller who made it rather than the agent."""
    await conn.execute(
        "INSERT INTO audit_log (thread_id, run_id, kind, tool, tool_call_id, idempotency_key,"
        " attempt, detail, actor) VALUES (%s, NULL, 'tool', %s, %s, %s, NULL, %s, %s)",
        (
            thread_id,
            record.tool,
            record.tool_call_id,
            f"{thread_id}:{record.tool_call_id}",
            Jsonb(
                storable(
                    {
                        "via": via,
                        "args": record.args,
                        "ok": record.ok,
                        "duration": record.duration,
                        "output": record.output[:500],
                        "result": record.result,
                    }
                )
            ),
            actor,
        ),
    )


async def prior_result(
    conn: AsyncConnection[Any], thread_id: str, idempotency_key: str
) -> PriorResult | None:
    """The recorded result of a tool call that already executed."""
    cur = await conn.execute(
        "SELECT detail FROM audit_log WHERE thread_id = %s AND kind = 'tool'"
        " AND idempotency_key = %s AND detail ? 'result' ORDER BY id LIMIT 1",
        (thread_id, idempotency_key),
    )
    row = await cur.fetchone()
    if row is None or row["detail"].get("result") is None:
        return None
    detail = row["detail"]
    return PriorResult(
        ok=bool(detail.get("ok")),
        content=str(detail["result"]),
        duration=float(detail.get("duration") or 0.0),
    )


async def answered(
    conn: AsyncConnection[Any], thread_id: str, interrupt_ids: list[str]
) -> list[str]:
    """Which of these interrupts already have a recorded answer."""
    cur = await conn.execute(
        "SELECT interrupt_id FROM approvals WHERE thread_id = %s AND interrupt_id = ANY(%s)",
        (thread_id, interrupt_ids),
    )
    return [row["interrupt_id"] for row in await cur.fetchall()]


async def entries(
    conn: AsyncConnection[Any], thread_id: str, *, after_id: int, limit: int
) -> list[dict[str, Any]]:
    """The thread's audit log after ``after_id``, oldest first."""
    cur = await conn.execute(
        "SELECT id, run_id::text AS run_id, kind, tool, tool_call_id, idempotency_key, attempt,"
        " detail, actor, created_at FROM audit_log WHERE thread_id = %s AND id > %s"
        " ORDER BY id LIMIT %s",
        (thread_id, after_id, limit),
    )
    rows = await cur.fetchall()
    return [{**r, "created_at": r["created_at"].isoformat()} for r in rows]
