"""The event log's writer: numbers a run attempt's events and stores them in group commits.

An event is numbered and queued at once; a flusher stores what is queued in one statement and one
commit (one notification for the batch), then hands the batch to this process's streams. While a
batch is being written, the next events gather behind it, so a run that emits in bursts (a step's
parallel updates) costs a transaction per burst, not per event, and an event alone is stored at
once. Three orderings keep the crash guarantees:

- a client never sees an event that is not stored: streams get a batch after its commit;
- a checkpoint is never durable before the events emitted before it: the checkpointer calls
  :meth:`Emitter.barrier` (``api.database.EVENTS_BARRIER_KEY``) before it writes, and the
  end event is written in the run's final transaction behind everything queued before it;
- nothing is stored after a failed batch (the run stops on the error), so sequence numbers have
  no gaps and ``Last-Event-ID`` replay and the takeover dedupe read the log as before.

It is also the run's :class:`api.adapters.RunHooks`: a graph's tool executions go to the audit log
through it, before a call's result can be checkpointed (not when its event is stored).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from psycopg import AsyncConnection

from api import metrics
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
        """The last sequence number given out."""
        self._queued: list[tuple[int, str, str]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None
        self._committed: list[tuple[int, str, str]] = []
        self._in_flight = 0
        self._progress = asyncio.Condition()
        """Notified after each batch (and when the flusher stops)."""

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
        """Queue an event; it is stored (and then streamed) by the next group commit."""
        self._raise_failure()
        self.seq += 1
        self._queued.append((self.seq, event, dumps(data)))
        self._start_flusher()

    async def barrier(self) -> None:
        """Return once every event emitted so far is stored; raise what stopped the writes.

        Events emitted while it waits do not hold it up (a model streaming tokens in one task
        must not delay another task's checkpoint write)."""
        target = self.seq
        async with self._progress:
            while self._stored() < target:
                self._raise_failure()
                self._start_flusher()
                await self._progress.wait()
        self._raise_failure()

    async def emit_on(self, conn: AsyncConnection[Any], event: str, data: Any) -> None:
        """Store, on ``conn`` (the caller's transaction), whatever is still queued and then this
        event; call :meth:`wake` once the transaction is committed."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)
        self._raise_failure()
        self.seq += 1
        batch, self._queued = [*self._queued, (self.seq, event, dumps(data))], []
        await self._store(conn, batch)
        self._committed = batch

    def wake(self) -> None:
        """Hand the events of a committed :meth:`emit_on` to this process's streams."""
        batch, self._committed = self._committed, []
        self.hub.publish(self.run_id, batch)

    async def close(self) -> None:
        """Stop writing (the attempt is over): wait for a flush in flight, drop the rest."""
        if self._flusher is not None and not self._flusher.done():
            await asyncio.gather(self._flusher, return_exceptions=True)
        self._queued = []

    @property
    def failed(self) -> BaseException | None:
        """What stopped the writes, if anything did."""
        return self._failed

    # -- internals -------------------------------------------------------------------------

    def _raise_failure(self) -> None:
        if self._failed is not None:
            raise self._failed

    def _stored(self) -> int:
        """The last sequence number stored: every lower one is stored, none queued or in flight
        is."""
        return self.seq - len(self._queued) - self._in_flight

    def _start_flusher(self) -> None:
        if (
            self._queued
            and self._failed is None
            and (self._flusher is None or self._flusher.done())
        ):
            self._flusher = asyncio.create_task(self._flush_loop(), name=f"events-{self.run_id}")

    async def _flush_loop(self) -> None:
        """The one writer of this attempt's batches, in order; runs while events are queued."""
        try:
            while self._queued and self._failed is None:
                batch, self._queued = self._queued, []
                self._in_flight = len(batch)
                async with self.pool.connection() as conn:
                    await self._store(conn, batch)
                self._in_flight = 0
                self.hub.publish(self.run_id, batch)
                async with self._progress:
                    self._progress.notify_all()
        except BaseException as err:  # the run sees it at its next emit or checkpoint
            self._failed = err
            if isinstance(err, asyncio.CancelledError):
                raise
        finally:
            async with self._progress:
                self._progress.notify_all()

    async def _store(self, conn: AsyncConnection[Any], batch: list[tuple[int, str, str]]) -> None:
        # Before the insert: its notification may come back before this process publishes it.
        self.hub.expect_local(self.run_id, batch[-1][0])
        started = time.perf_counter()
        await events.append_batch(conn, self.run_id, self.attempt, batch)
        metrics.observe_event_batch(len(batch), time.perf_counter() - started)
