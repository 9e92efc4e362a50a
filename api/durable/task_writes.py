"""A run's task writes, stored with the step's checkpoint when it comes soon enough.

LangGraph saves what each task returns (``aput_writes``) as soon as the task ends, in a
transaction of its own, and then the step's checkpoint in another: a step of five parallel tool
calls costs six commits. For a run the service executes, :class:`api.durable.saver.PooledSaver`
hands a task's writes to a :class:`WriteBuffer` instead:

- a checkpoint of the same thread saved within ``LINGER_SECONDS`` takes them along as it is
  handed to the saver (before it waits for a connection): they are written in its transaction,
  before it, in its one statement (:meth:`WriteBuffer.take`,
  ``api.store.checkpoint_tables.step``);
- otherwise they are written on their own when the delay is over, together with every other
  write of the thread that came meanwhile (the parallel tasks of one step): one statement,
  which also stores the checkpoints the run holds back, if any (``api.durable.run_memory``).

Writes to a ``DeltaChannel`` (the built-in agent's ``messages``) do not wait: LangGraph saves
the step's checkpoint only after they are stored (the channel is rebuilt from its writes), so
no checkpoint can come to take them along, and waiting would hold every step for the whole
delay. They, and the thread's other queued writes, are stored in the event loop's next round
(``api.durable.run_memory.SaverRun.delta_channels``): a statement of their own, then the
checkpoint's.

``aput_writes`` returns once its writes are committed, either way, so what waits for them
(LangGraph's background executor at the end of a run, a checkpoint after delta-channel writes)
still sees them stored. A step whose tasks run long still has each finished task's writes
stored within the delay, so a takeover re-runs only the unfinished ones, as before. What changes
is the window: a task's writes are durable up to ``LINGER_SECONDS`` later than a round trip
after it ended. The built-in agent's tools do not rely on that window (the audit log records a
call before its result can be checkpointed, and a repeat returns the recorded result).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any

from psycopg import AsyncConnection

from api.platform.database import run_to_completion
from api.store.checkpoint_tables.step import TaskWrite, writes_statement

LINGER_SECONDS = 0.02
"""How long a task's writes wait for a checkpoint to take them along before they are stored
alone (the event log's delay, ``api.durable.event_writer.LINGER_SECONDS``). A step ends well
within it on an idle machine; under load the event loop lags, and a shorter delay (5 ms was
tried) lets the writes of about one step in seven go alone at 200 concurrent runs, a statement
and a pooled connection each."""


class PendingWrites:
    """Writes of one thread waiting to be stored, and the ``aput_writes`` calls waiting for
    them."""

    def __init__(self, timer: asyncio.Handle) -> None:
        self.rows: list[TaskWrite] = []
        self.waiters: list[asyncio.Future[None]] = []
        self.timer = timer
        self.soon = False
        """Stored in the loop's next round, not after the delay (``WriteBuffer.add``)."""

    def stored(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def failed(self, err: BaseException) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_exception(err)
                waiter.exception()  # retrieved here: a caller cancelled meanwhile reads none


Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]
"""Opens a connection for writes stored on their own (a slot of the saver's, then the pool)."""

Flush = Callable[[str, PendingWrites], Awaitable[None]]
"""Stores a thread's writes whose delay is over: with the checkpoints its run holds back
(``api.durable.run_memory.HeldCheckpoint``), or on their own (:meth:`WriteBuffer.write_alone`) when
it holds none (``api.durable.saver.PooledSaver.release``)."""


class WriteBuffer:
    """The task writes of each thread not stored yet (one saver's, in one process)."""

    def __init__(self, connect: Connect, flush: Flush) -> None:
        self._connect = connect
        self._flush = flush
        self._pending: dict[str, PendingWrites] = {}
        self._writing: set[asyncio.Task[None]] = set()

    async def add(self, thread_id: str, rows: list[TaskWrite], *, soon: bool = False) -> None:
        """Queue ``rows`` for ``thread_id``; return once they are committed (raise what stopped
        that). ``soon``: the checkpoint waits for these (writes to a delta channel), so they
        and the thread's others are stored in the loop's next round instead of after the
        delay; writes of parallel tasks that ended together still share one statement."""
        loop = asyncio.get_running_loop()
        pending = self._pending.get(thread_id)
        if pending is None:
            timer = loop.call_later(LINGER_SECONDS, self._linger_over, thread_id)
            pending = self._pending[thread_id] = PendingWrites(timer)
        if soon and not pending.soon:
            pending.timer.cancel()
            pending.timer = loop.call_soon(self._linger_over, thread_id)
            pending.soon = True
        pending.rows.extend(rows)
        waiter: asyncio.Future[None] = loop.create_future()
        pending.waiters.append(waiter)
        await waiter

    def take(self, thread_id: str) -> PendingWrites | None:
        """The writes of ``thread_id`` queued so far, for a checkpoint's statement: the caller
        stores them in its statement and reports ``stored()`` or ``failed()``, or,
        when its statement was never sent, hands them to :meth:`store_alone`."""
        pending = self._pending.pop(thread_id, None)
        if pending is not None:
            pending.timer.cancel()
        return pending

    def store_alone(self, pending: PendingWrites) -> None:
        """Store taken writes in a statement of their own (the checkpoint that took them
        could not send its statement)."""
        self._spawn(self.write_alone(pending))

    def _spawn(self, write: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(write, name="task-writes")
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    def _linger_over(self, thread_id: str) -> None:
        pending = self.take(thread_id)
        if pending is not None:
            self._spawn(self._flushed(thread_id, pending))

    async def _flushed(self, thread_id: str, pending: PendingWrites) -> None:
        try:
            await self._flush(thread_id, pending)
        except Exception as err:  # the callers get it from aput_writes (if not told already)
            pending.failed(err)

    async def write_alone(self, pending: PendingWrites) -> None:
        """Store taken writes in a statement of their own; their callers get the outcome."""
        try:
            async with self._connect() as conn:
                sql, params = writes_statement(pending.rows)
                await run_to_completion(conn.execute(sql, params, binary=True))
        except BaseException as err:  # the callers get it from aput_writes
            pending.failed(err)
            if isinstance(err, asyncio.CancelledError):
                raise
        else:
            pending.stored()
