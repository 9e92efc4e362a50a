"""The event log's writer: numbers a run attempt's events and stores them in group commits.

An event is numbered and queued at once. What is queued is stored in one statement, in one of
two transactions:

- **the next checkpoint's**: the checkpointer asks for the run's queued events
  (:meth:`Emitter.with_checkpoint`, ``api.durable.run_memory.SaverRun.events``) and writes them
  in the transaction that writes the checkpoint, before it. A step's events and its checkpoint cost
  one commit, and a checkpoint is never durable without the events emitted before it;
- **its own**, when no checkpoint comes first: a flusher waits ``LINGER_SECONDS`` after an
  event (a step that is about to end takes it along), then stores what is queued; events that
  come while it writes gather behind it. A step that runs long (a tool, a model streaming) still
  shows its events within that delay, and the first event a node emits while it runs
  (``MID_STEP``) is stored without it.

One batch is written at a time, in order (a lock), and streams get a batch only after its commit,
so a client never sees an event that is not stored. Nothing is stored after a failed batch (the
run stops on the error): sequence numbers have no gaps, and ``Last-Event-ID`` replay and the
takeover dedupe read the log as before. The end event is written in the run's final transaction
behind everything queued before it.

It is also the run's :class:`api.project.adapters.RunHooks`: a graph's tool executions go to the
audit log through it, before a call's result can be checkpointed (not when its event is stored).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from psycopg import AsyncConnection

from api.durable.hub import Hub
from api.platform import metrics
from api.platform.database import Pool
from api.platform.serde import dumps
from api.store import audit, events
from api.store.audit import PriorResult, ToolRecord
from api.store.claimed_run import ClaimedRun
from api.store.events import LostRun

LINGER_SECONDS = 0.02
"""How long a queued event waits for a checkpoint to take it along before it is stored alone:
what a node emits while it runs after its first event (``MID_STEP``), a model's tokens say,
reaches clients in batches this far apart at most. Under load a step's end comes later than
on an idle machine (the event loop lags): with 5 ms, about two events a run went alone at 200
concurrent runs."""

MID_STEP = frozenset({"custom", "messages"})
"""Events a node emits while it runs (its writer's, a model's tokens), unlike the updates and
values LangGraph emits as a step ends, just before its checkpoint takes them along. The first of
an attempt does not wait ``LINGER_SECONDS``: what a client sees first of a run's work (a plan, a
model's first token) comes as soon as it is stored, for one statement more per attempt."""

T = TypeVar("T")

Batch = list[tuple[int, str, str]]
"""Events as stored: ``(seq, event, data JSON)``."""


class CheckpointEvents:
    """A run's events as a checkpoint's statement takes them along
    (:meth:`Emitter.with_checkpoint`)."""

    def __init__(self, emitter: Emitter) -> None:
        self._emitter = emitter
        self.batch: Batch = []
        self.started = 0.0
        self.committed = False

    def take(self) -> events.EventRows | None:
        """Every event queued so far (``None``: none), now the statement's to store."""
        emitter = self._emitter
        self.batch, emitter._queued = emitter._queued, []
        emitter._stop_lingering()  # nothing left for the flusher
        if not self.batch:
            return None
        emitter.hub.expect_local(emitter.run_id, self.batch[-1][0])
        self.started = time.perf_counter()
        return events.EventRows(emitter.run_id, emitter.attempt, self.batch, emitter.hub.peers)

    def stored(self) -> None:
        """The statement carrying them succeeded."""
        self.committed = True


class Emitter:
    """The writer of one attempt of one run."""

    def __init__(self, pool: Pool, hub: Hub, run_id: str, attempt: int, thread_id: str) -> None:
        self.pool, self.hub, self.run_id, self.attempt = pool, hub, run_id, attempt
        self.thread_id = thread_id
        self.seq = 0
        """The last sequence number given out."""
        self._queued: Batch = []
        self._writing = asyncio.Lock()
        """Held while a batch is written and published: batches land in order."""
        self._flusher: asyncio.Task[None] | None = None
        self._linger: asyncio.TimerHandle | None = None
        """Pending while queued events wait for a checkpoint to take them along."""
        self._failed: BaseException | None = None
        self._committed: Batch = []
        self._shown = False
        """Whether an event emitted during a step was stored at once yet (``MID_STEP``)."""

    @classmethod
    def of_run(cls, pool: Pool, hub: Hub, run: ClaimedRun, seq: int = 0) -> Emitter:
        """The writer of ``run``'s attempt, whose last event so far is ``seq``."""
        emitter = cls(pool, hub, run.run_id, run.attempt, run.thread_id)
        emitter.seq = seq
        return emitter

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
        """Queue an event; it is stored (and then streamed) by the next group commit. The
        attempt's first event emitted during a step (``MID_STEP``) is stored at once."""
        self._raise_failure()
        self.seq += 1
        self._queued.append((self.seq, event, dumps(data)))
        if event in MID_STEP and not self._shown:
            self._shown = True
            self._flush_now()
            if self._flusher is not None:
                # The graph waits for it: its next steps would share the event loop with this
                # statement's round trip and delay what a client sees first by as much.
                await asyncio.wait([self._flusher])
                self._raise_failure()
        else:
            self._start_flusher()

    @asynccontextmanager
    async def with_checkpoint(self) -> AsyncIterator[CheckpointEvents]:
        """For a checkpoint's write: yields :class:`CheckpointEvents`, whose ``take()`` hands
        over every event queued so far, for the checkpoint's statement to store before it
        (``api.store.checkpoint_tables.step``: fenced by an error that fails the statement, not
        by a count read back). The writer calls ``stored()`` once the statement succeeded; the
        events are streamed when the block exits. An error in the block before that puts them
        back in the queue, unstored; the fence's error comes out as :class:`LostRun`."""
        self._raise_failure()
        async with self._writing:
            self._raise_failure()
            step = CheckpointEvents(self)
            try:
                yield step
            except BaseException as err:
                if step.committed:  # stored, then cancelled: streamed all the same
                    self._published(step)
                    raise
                if events.is_fenced_out(err):
                    self._failed = LostRun(self.run_id)
                    raise self._failed from err
                if isinstance(err, LostRun):
                    self._failed = err
                else:  # failed with the checkpoint: to be stored later, in order
                    self._queued = [*step.batch, *self._queued]
                    self._start_flusher()
                raise
            self._published(step)

    def _published(self, step: CheckpointEvents) -> None:
        if step.batch:
            metrics.observe_event_batch(len(step.batch), time.perf_counter() - step.started)
            self.hub.publish(self.run_id, step.batch)

    async def barrier(self) -> None:
        """Return once every event emitted so far is stored; raise what stopped the writes.
        (The flusher runs until the queue is empty.)"""
        self._flush_now()
        await self.close()
        self._raise_failure()

    async def emit_last(
        self, event: str, data: Any, store: Callable[[events.EventRows], Awaitable[T]]
    ) -> T:
        """The attempt's last event: ``store`` gets whatever is still queued and then this
        event, to store in a statement of its own (fenced: ``events.FENCED_EVENTS_CTE``), and
        no other batch is written meanwhile; call :meth:`wake` once that statement succeeded.
        Returns what ``store`` returns."""
        async with self._writing:
            self._raise_failure()
            self.seq += 1
            batch, self._queued = [*self._queued, (self.seq, event, dumps(data))], []
            self.hub.expect_local(self.run_id, batch[-1][0])
            result = await store(events.EventRows(self.run_id, self.attempt, batch, self.hub.peers))
            self._committed = batch
            return result

    def wake(self) -> None:
        """Hand the events of a stored :meth:`emit_last` to this process's streams."""
        batch, self._committed = self._committed, []
        self.hub.publish(self.run_id, batch)

    async def close(self) -> None:
        """The attempt is over: let a flush in flight (or about to start) land."""
        if self._linger is not None:
            self._flush_now()
        if self._flusher is not None and not self._flusher.done():
            await asyncio.gather(self._flusher, return_exceptions=True)

    @property
    def failed(self) -> BaseException | None:
        """What stopped the writes, if anything did."""
        return self._failed

    # -- internals -------------------------------------------------------------------------

    def _raise_failure(self) -> None:
        if self._failed is not None:
            raise self._failed

    def _start_flusher(self) -> None:
        """Store what is queued ``LINGER_SECONDS`` from now, unless a checkpoint takes it first
        (a timer, not a task: most steps end with a checkpoint well within the delay)."""
        if self._queued and self._failed is None and self._linger is None and not self._flushing:
            self._linger = asyncio.get_running_loop().call_later(LINGER_SECONDS, self._flush_now)

    @property
    def _flushing(self) -> bool:
        return self._flusher is not None and not self._flusher.done()

    def _stop_lingering(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def _flush_now(self) -> None:
        self._stop_lingering()
        if self._queued and self._failed is None and not self._flushing:
            self._flusher = asyncio.create_task(self._flush_loop(), name=f"events-{self.run_id}")

    async def _flush_loop(self) -> None:
        """Stores what no checkpoint took along, batch by batch, while events are queued."""
        try:
            while self._queued and self._failed is None:
                async with self._writing:
                    if not self._queued or self._failed is not None:
                        break
                    batch, self._queued = self._queued, []
                    async with self.pool.connection() as conn:
                        await self._store(conn, batch)
                    self.hub.publish(self.run_id, batch)
        except BaseException as err:  # the run sees it at its next emit or checkpoint
            self._failed = err
            if isinstance(err, asyncio.CancelledError):
                raise

    async def _store(self, conn: AsyncConnection[Any], batch: Batch) -> None:
        # Before the insert: its notification may come back before this process publishes it.
        self.hub.expect_local(self.run_id, batch[-1][0])
        started = time.perf_counter()
        await events.append_batch(conn, self.run_id, self.attempt, batch, notify=self.hub.peers)
        metrics.observe_event_batch(len(batch), time.perf_counter() - started)
