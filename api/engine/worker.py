"""Workers: claim runs from the queue, execute them (``api.engine.execution``), keep their leases.

Every server process runs one :class:`Workers`. A run is claimed with ``FOR UPDATE SKIP LOCKED``
and held by a lease the heartbeat renews; a process that dies stops renewing, and any live one
claims the run again after the lease expires, as its next attempt.

The attempts limit counts failures to progress: each claim compares what the thread has saved
with what it had when the previous attempt was claimed, and a run ends in error after
``max_attempts`` attempts in a row that saved nothing (one that kills its process at the same
step every time), however many attempts that moved it on came before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from api.durable.hub import Hub
from api.engine.ephemeral import sweep_loop
from api.engine.execution import Executor
from api.engine.hand_back import after_database_fault, release_claimed
from api.engine.lease_connection import LeaseConnection
from api.engine.runtime import Runtime
from api.engine.worker_ids import new_worker_id, pid_alive
from api.platform.db_health import is_database_fault, log_failure
from api.platform.logs import bind_run
from api.platform.metrics import attempt_claimed
from api.store import events, runs
from api.store.claimed_run import ClaimedRun
from api.store.events import LostRun

logger = logging.getLogger(__name__)

CLAIM_BATCH = 8
"""Most runs one claim statement takes."""


@dataclass
class Execution:
    run: ClaimedRun
    last_seq: int = 0
    """The run's last event sequence number when it was claimed."""
    task: asyncio.Task[None] | None = None
    stop_reason: str | None = None
    """``cancel``, ``lost`` or ``shutdown`` once the worker decided to stop it."""
    started: bool = False


@dataclass
class Workers:
    """The worker pool of one process."""

    runtime: Runtime
    hub: Hub
    worker_id: str = field(default_factory=new_worker_id)

    def __post_init__(self) -> None:
        self.settings = self.runtime.settings
        self.pool = self.runtime.pool
        self.executor = Executor(self.runtime, self.hub)
        self.active: dict[str, Execution] = {}
        self.slots = asyncio.Semaphore(self.settings.workers)
        self.stopping = False
        self._loops: list[asyncio.Task[None]] = []
        self.hub.on_cancel = self._cancel_local

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        async with self.pool.connection() as conn:
            host = self.worker_id.split("/")[0] + "/"
            swept = await runs.expire_dead_workers(conn, pid_alive, host)
            if swept:
                logger.info("recovering %d run(s) orphaned by a dead process of this host", swept)
        self._loops = [
            asyncio.create_task(self._claim_loop(), name="threadline-claim"),
            asyncio.create_task(self._heartbeat_loop(), name="threadline-heartbeat"),
            asyncio.create_task(sweep_loop(self.runtime), name="threadline-threadless"),
        ]

    async def stop(self) -> None:
        """Stop claiming; give running runs the grace period, then hand the rest back."""
        self.stopping = True
        self.hub.runs_changed.set()
        for loop in self._loops[:1]:
            loop.cancel()
        # Its end hands back what a claim in flight took (see _claim_loop).
        await asyncio.gather(*self._loops[:1], return_exceptions=True)
        pending = [e.task for e in self.active.values() if e.task]
        if pending:
            await asyncio.wait(pending, timeout=self.settings.shutdown_grace_seconds)
        for execution in list(self.active.values()):
            self._stop(execution, "shutdown")
        remaining = [e.task for e in self.active.values() if e.task]
        if remaining:
            await asyncio.wait(remaining, timeout=10)
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)

    # -- runs started where they are created -------------------------------------------------

    async def reserve(self) -> tuple[str, float] | None:
        """A free slot for a run this process is creating, to start it here at once instead of
        queueing it for a claim (``runs.insert(start=...)``): ``(worker id, lease seconds)``, or
        None when every slot is taken or the workers are stopping. Give the slot to
        :meth:`start_reserved` once the run is committed, or back with :meth:`unreserve`."""
        if self.stopping or self.slots.locked():
            return None
        await self.slots.acquire()  # free: returns at once, nothing else runs meanwhile
        return self.worker_id, self.settings.lease_seconds

    def unreserve(self) -> None:
        self.slots.release()

    def start_reserved(self, run: ClaimedRun) -> None:
        """Execute a run committed as claimed by this worker (its first attempt,
        ``api.store.runs.Inserted.claimed``) in the slot :meth:`reserve` took."""
        execution = self._launch(run, last_seq=0)
        if self.stopping:  # stopping began meanwhile: hand it back like the other runs
            self._stop(execution, "shutdown")

    # -- loops ---------------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self.stopping:
            await self.slots.acquire()
            taken = 1
            # Claim as many runs as there are free slots (a few at a time) in one statement.
            while taken < CLAIM_BATCH and not self.slots.locked():
                await self.slots.acquire()
                taken += 1
            self.hub.runs_changed.clear()
            claiming = asyncio.ensure_future(self._claim(taken))
            try:
                # Shielded: cancelled mid-statement (on shutdown), psycopg still waits for the
                # statement, and runs it claimed would be dropped, held by nobody until their
                # leases ran out (and counted as attempts that stalled). They are handed back.
                claimed = await asyncio.shield(claiming)
            except asyncio.CancelledError:
                for _ in range(taken):
                    self.slots.release()
                await asyncio.shield(release_claimed(self.pool, claiming, self.worker_id))
                raise
            except Exception as err:
                for _ in range(taken):
                    self.slots.release()
                if is_database_fault(err):
                    self.pool.health.fault(err)
                    await self.pool.health.wait_up(timeout=self.settings.poll_seconds * 5)
                else:
                    logger.exception("claiming a run failed; retrying")
                await asyncio.sleep(self.settings.poll_seconds)
                continue
            for _ in range(taken - len(claimed)):
                self.slots.release()
            for run, last_seq in claimed:
                self._launch(run, last_seq)
            if len(claimed) < taken:
                # The queue had no more for us: wait for a new run (or the poll) instead of
                # asking again at once, which costs a claim statement per run for nothing.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self.hub.runs_changed.wait(), timeout=self.settings.poll_seconds
                    )

    async def _claim(self, limit: int) -> list[tuple[ClaimedRun, int]]:
        async with self.pool.connection() as conn:
            return await runs.claim(
                conn,
                self.worker_id,
                self.settings.lease_seconds,
                limit=limit,
                executing=list(self.active),
            )

    async def _heartbeat_loop(self) -> None:
        """Renew the leases of the runs executing here, on a connection of its own: however
        busy the pool is with those runs, their heartbeat never waits behind them."""
        lease = LeaseConnection(self.runtime.database.url)
        try:
            while True:
                await asyncio.sleep(self.settings.heartbeat_seconds)
                if self.active:
                    await self._renew(lease)
        finally:
            await lease.close()

    async def _renew(self, lease: LeaseConnection) -> None:
        # Only runs held before the renewal started can be judged by it: a run claimed while
        # it was in flight is not in its result yet, and is not lost.
        before = list(self.active.items())
        try:
            held = await runs.renew(
                await lease.get(),
                self.worker_id,
                self.settings.lease_seconds,
                [run_id for run_id, _ in before],
            )
        except Exception as err:
            log_failure(logger, self.pool.health, err, "renewing leases failed")
            await lease.close()  # a new connection next time
            return
        for run_id, execution in before:
            mine = held.get(run_id)
            if mine is None or mine[0] != execution.run.attempt:
                if execution.task and not execution.task.done():
                    self._stop(execution, "lost")
            elif mine[1] and mine[2]:
                self._stop(execution, "cancel")

    def _cancel_local(self, run_id: str) -> None:
        execution = self.active.get(run_id)
        if execution:
            self._stop(execution, "cancel")

    def _stop(self, execution: Execution, reason: str) -> None:
        if execution.stop_reason is None and execution.task and not execution.task.done():
            execution.stop_reason = reason
            # A task cancelled before its first step never runs its body (nor its cleanup):
            # it sees ``stop_reason`` when it starts instead.
            if execution.started:
                execution.task.cancel()

    # -- one run -------------------------------------------------------------------------------

    def _launch(self, run: ClaimedRun, last_seq: int) -> Execution:
        """Execute an attempt this worker holds (claimed, or committed as claimed), in a slot
        already taken."""
        attempt_claimed(run.attempt, run.created_at, run.claimed_at)
        self.hub.executing(run.run_id, last_seq)
        execution = Execution(run=run, last_seq=last_seq)
        self.active[run.run_id] = execution
        execution.task = asyncio.create_task(self._execute(execution), name=run.run_id)
        return execution

    async def _execute(self, execution: Execution) -> None:
        run = execution.run
        run_id = run.run_id
        execution.started = True
        # This task's context: every line logged about the attempt names it.
        bind_run(run_id, run.thread_id, run.attempt)
        try:
            if execution.stop_reason:  # stopped before it started: nothing ran yet
                raise asyncio.CancelledError
            await self.executor.execute(run, execution.last_seq)
        except asyncio.CancelledError:
            await self._after_stop(execution)
        except LostRun:
            logger.warning("run %s was taken over by another worker", run_id)
        except Exception as err:
            if is_database_fault(err):
                await after_database_fault(
                    self.pool, self.hub, run, self.worker_id, err, lambda: self.stopping
                )
            else:
                logger.exception("run %s: bookkeeping failed; its lease will expire", run_id)
        finally:
            if self.active.get(run_id) is execution:  # not a later attempt claimed meanwhile
                del self.active[run_id]
                self.hub.forget_run(run_id)
            self.slots.release()

    async def _after_stop(self, execution: Execution) -> None:
        run = execution.run
        reason = execution.stop_reason
        if reason == "cancel":
            async with self.pool.connection() as conn:
                emitter = self.executor.emitter(run, await events.last_seq(conn, run.run_id))
            with contextlib.suppress(LostRun):
                await self.executor.finish(emitter, run, "interrupted", "cancelled on request")
        elif reason == "lost":
            logger.warning(
                "run %s attempt %s: lease lost (another worker took it over); stopped",
                run.run_id,
                run.attempt,
            )
        elif reason == "shutdown":
            async with self.pool.connection() as conn:
                await runs.release(conn, run.run_id, run.attempt, self.worker_id)
        else:
            logger.warning("run %s was cancelled from outside; its lease expires", run.run_id)
