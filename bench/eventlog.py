"""The event log's write cost: ``api.store.events.append`` against a plain insert, per event.

One connection (the pool's settings: autocommit, statements prepared) writes events of a
representative size one at a time, as a worker does, to a fresh database with threadline's
migrations. A second connection listens on the events channel like a server's hub, so the
notifications are delivered, not just queued. Variants, each on a run of its own:

- ``insert``: ``INSERT INTO run_events ... VALUES`` — the floor for storing an event;
- ``insert+notify``: the insert and ``pg_notify`` in one statement, no fence;
- ``fenced``: the insert guarded by the run's attempt and status (``WHERE EXISTS``), no notify;
- ``append``: ``api.store.events.append`` itself (fenced insert + notify);
- ``emit``: ``append`` on a connection taken from an ``api.platform.database`` pool per event, as
the
  worker's ``Emitter.emit`` does (pool checkout and return included).

The variants run interleaved in several short rounds; each reports the median over rounds of the
mean microseconds per event, and the best round (the cost with the least interference from the
shared machine), so a burst of load hits all of them alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection

from api.platform.database import connection_kwargs, migrate, open_pool
from api.platform.serde import dumps
from api.store import events

VARIANTS = ("insert", "insert+notify", "fenced", "append", "emit")

INSERT = (
    "INSERT INTO run_events (run_id, seq, event, data, attempt)"
    " VALUES (%(run)s, %(seq)s, %(event)s, %(data)s::json, %(attempt)s)"
)
INSERT_NOTIFY = """
WITH ins AS (
    INSERT INTO run_events (run_id, seq, event, data, attempt)
    VALUES (%(run)s, %(seq)s, %(event)s, %(data)s::json, %(attempt)s)
    RETURNING seq)
SELECT pg_notify(%(channel)s, %(run)s::text || ':' || seq) FROM ins
"""
FENCED = """
INSERT INTO run_events (run_id, seq, event, data, attempt)
SELECT %(run)s, %(seq)s, %(event)s, %(data)s::json, %(attempt)s
WHERE EXISTS (SELECT 1 FROM runs WHERE run_id = %(run)s AND attempt = %(attempt)s
              AND status = 'running')
"""


def sample_events() -> list[tuple[str, str]]:
    """(event, JSON) pairs shaped like a ``counter`` run's: updates with messages, progress."""
    from langchain_core.messages import AIMessage, ToolMessage

    call = {"name": "run_command", "args": {"command": ["python", "append.py", "1", "0"]}}
    ai = AIMessage(
        content="Appending line 1.",
        tool_calls=[{**call, "id": "call_1", "type": "tool_call"}],
        id="lc_run--0001",
    )
    tool = ToolMessage(content="exit code 0\n", tool_call_id="call_1", name="run_command")
    return [
        ("custom", dumps({"type": "step", "node": "agent", "step": 1})),
        ("updates", dumps({"agent": {"messages": [ai], "step": 1, "status": "running"}})),
        ("custom", dumps({"type": "tool_started", "tool_call_id": "call_1", **call})),
        ("custom", dumps({"type": "tool_finished", "tool_call_id": "call_1", "ok": True})),
        ("updates", dumps({"tools": {"messages": [tool]}})),
    ]


async def _new_run(conn: AsyncConnection[Any], thread_id: str) -> str:
    run_id = str(uuid.uuid4())
    await conn.execute(
        "INSERT INTO runs (run_id, thread_id, assistant_id, graph_id, kwargs, status, attempt)"
        " VALUES (%s, %s, 'agent', 'agent', '{}', 'running', 1)",
        (uuid.UUID(run_id), thread_id),
    )
    return run_id


async def run(url: str, *, events_per_round: int = 300, rounds: int = 5) -> dict[str, Any]:
    """Microseconds per event for every variant (see the module docstring)."""
    kwargs = connection_kwargs()
    payloads = sample_events()
    received = 0

    async def listen(conn: AsyncConnection[Any]) -> None:
        nonlocal received
        async for _ in conn.notifies():
            received += 1

    async with (
        await AsyncConnection.connect(url, **kwargs) as conn,
        await AsyncConnection.connect(url, **{**kwargs, "prepare_threshold": None}) as listener,
        open_pool(url, max_size=4) as pool,
    ):
        await migrate(conn)
        thread_id = str(uuid.uuid4())
        await conn.execute("INSERT INTO threads (thread_id) VALUES (%s)", (thread_id,))
        await listener.execute(f"LISTEN {events.EVENTS_CHANNEL}")
        listening = asyncio.create_task(listen(listener))

        def params(run_id: str, seq: int) -> dict[str, Any]:
            event, data = payloads[seq % len(payloads)]
            return {
                "run": uuid.UUID(run_id),
                "seq": seq,
                "event": event,
                "data": data,
                "attempt": 1,
                "channel": events.EVENTS_CHANNEL,
            }

        async def insert(run_id: str, seq: int) -> None:
            await conn.execute(INSERT, params(run_id, seq))

        async def insert_notify(run_id: str, seq: int) -> None:
            await conn.execute(INSERT_NOTIFY, params(run_id, seq))

        async def fenced(run_id: str, seq: int) -> None:
            await conn.execute(FENCED, params(run_id, seq))

        async def append(run_id: str, seq: int) -> None:
            event, data = payloads[seq % len(payloads)]
            await events.append(conn, run_id, seq, event, data, 1)

        async def emit(run_id: str, seq: int) -> None:
            event, data = payloads[seq % len(payloads)]
            async with pool.connection() as c:
                await events.append(c, run_id, seq, event, data, 1)

        writers: dict[str, Callable[[str, int], Awaitable[None]]] = {
            "insert": insert,
            "insert+notify": insert_notify,
            "fenced": fenced,
            "append": append,
            "emit": emit,
        }
        per_round: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for r in range(rounds + 1):  # round 0 warms up (prepares statements) and is dropped
            order = list(VARIANTS) if r % 2 else list(reversed(VARIANTS))
            for variant in order:
                run_id = await _new_run(conn, thread_id)
                write = writers[variant]
                n = 30 if r == 0 else events_per_round
                t0 = time.perf_counter()
                for seq in range(1, n + 1):
                    await write(run_id, seq)
                if r:
                    per_round[variant].append(1e6 * (time.perf_counter() - t0) / n)
        await asyncio.sleep(0.2)  # let the last notifications arrive
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        cur = await conn.execute("SELECT avg(pg_column_size(data))::int AS b FROM run_events")
        row = await cur.fetchone()
    us = {v: round(statistics.median(xs), 1) for v, xs in per_round.items()}
    return {
        "events_per_round": events_per_round,
        "rounds": rounds,
        "event_bytes": row["b"] if row else None,
        "us_per_event": us,
        "best_us": {v: round(min(xs), 1) for v, xs in per_round.items()},
        "spread_us": {v: [round(min(xs), 1), round(max(xs), 1)] for v, xs in per_round.items()},
        "notifications_received": received,
        "overhead_vs_insert": {
            v: round(us[v] / us["insert"], 2) if us["insert"] else None for v in VARIANTS
        },
        "best_vs_insert": {
            v: round(min(per_round[v]) / min(per_round["insert"]), 2) for v in VARIANTS
        },
    }
