"""The event log's writer: numbers a run attempt's events and stores each before anyone reads it.

It is also the run's :class:`api.adapters.RunHooks`: a graph's tool executions go to the audit log
through it, before a call's result can be checkpointed (not when its event is stored).
"""

from __future__ import annotations

from typing import Any

from api.adapters import PriorResult, ToolRecord
from api.database import Pool
from api.hub import Hub
from api.serde import dumps
from api.store import audit, events


class Emitter:
    """The writer of one attempt of one run."""

    def __init__(self, pool: Pool, hub: Hub, run_id: str, attempt: int, thread_id: str) -> None:
        self.pool, self.hub, self.run_id, self.attempt = pool, hub, run_id, attempt
        self.thread_id = thread_id
        self.seq = 0
        self._unpublished: list[tuple[int, str, str]] = []

    async def prior_result(self, idempotency_key: str) -> PriorResult | None:
        async with self.pool.connection() as conn:
            return await audit.prior_result(conn, self.thread_id, idempotency_key)

    async def record_tool(self, record: ToolRecord) -> None:
        async with self.pool.connection() as conn:
            await audit.record_tool(
                conn,
                thread_id=self.thread_id,
                run_id=self.run_id,
                attempt=self.attempt,
                record=record,
            )

    async def emit(self, event: str, data: Any) -> None:
        async with self.pool.connection() as conn:
            await self.emit_on(conn, event, data)
        self.wake()

    async def emit_on(self, conn: Any, event: str, data: Any) -> None:
        """Store on ``conn``; call :meth:`wake` once it is committed."""
        text = dumps(data)
        # Before the insert: its notification may come back before this process publishes it.
        self.hub.expect_local(self.run_id, self.seq + 1)
        await events.append(conn, self.run_id, self.seq + 1, event, text, self.attempt)
        self.seq += 1
        self._unpublished.append((self.seq, event, text))

    def wake(self) -> None:
        """Hand the committed events to this process's streams of the run."""
        self.hub.publish(self.run_id, self._unpublished)
        self._unpublished = []
