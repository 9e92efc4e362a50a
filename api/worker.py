"""Workers: claim runs from the queue, execute them, store their events, keep their leases.

Every server process runs one :class:`Workers`. A run is claimed with ``FOR UPDATE SKIP LOCKED``
and held by a lease the heartbeat renews; a process that dies stops renewing, and any live one
claims the run again after the lease expires, as its next attempt. Every attempt passes the run's
own input with the run's id in the config metadata: LangGraph then continues from the run's last
checkpoint (as with input ``None``) once one exists, and starts the input when the previous
attempt died before saving any, so no input is lost and no finished step runs twice.

The attempts limit counts failures to progress: each claim compares what the thread has saved
with what it had when the previous attempt was claimed, and a run ends in error after
``max_attempts`` attempts in a row that saved nothing (one that kills its process at the same
step every time), however many attempts that moved it on came before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from langgraph.types import Command

from agent.nodes.tool_call import PRIOR_RESULT_KEY, RECORD_TOOL_KEY
from api.compaction import compact_thread
from api.database import Pool, PooledSaver
from api.hub import Hub
from api.serde import dumps
from api.settings import Settings
from api.store import audit, events, runs, threads
from api.store.events import LostRun
from api.stream_modes import event_names, is_cached, replayed_call, tool_call_ids

logger = logging.getLogger(__name__)

CLAIM_BATCH = 8
"""Most runs one claim statement takes."""
ALWAYS_STORED = ("updates", "custom")
"""Stored for every run whatever it streams: the page, the audit log and replays rely on them."""


def graph_modes(requested: list[str]) -> list[str]:
    """LangGraph stream modes to run with: the requested ones plus those always stored."""
    return sorted(event_names(requested) | set(ALWAYS_STORED))


def update_key(data_json: str) -> str:
    """What identifies an ``updates`` event across attempts: its JSON without ``__metadata__``
    and without message ids (``add_messages`` may give a message its id after the update was
    first stored, while the saved pending write that a cached update comes from has none)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            message = "type" in value and "content" in value
            return {
                k: strip(v)
                for k, v in value.items()
                if k != "__metadata__" and not (message and k == "id")
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.dumps(strip(json.loads(data_json)), sort_keys=True)


async def stored_updates(pool: Pool, run_id: str) -> Counter[str]:
    """The ``updates`` events a run has stored so far, by :func:`update_key`."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT data::text AS data FROM run_events WHERE run_id = %s AND event = 'updates'",
            (uuid.UUID(run_id),),
        )
        return Counter(update_key(row["data"]) for row in await cur.fetchall())


def run_input(kwargs: dict[str, Any]) -> Any:
    command = kwargs.get("command")
    if command:
        return Command(
            resume=command.get("resume"),
            update=command.get("update"),
            goto=command.get("goto") or (),
        )
    return kwargs.get("input")


def auth_config(user: dict[str, Any] | None) -> dict[str, Any]:
    """What a graph sees of the run's caller, as on LangGraph Server: ``langgraph_auth_user``
    (dict or attribute access), its id and permissions. Nothing without authentication."""
    if not user:
        return {}
    from api.auth.user import User

    who = User.from_result(user)
    return {
        "langgraph_auth_user": who,
        "langgraph_auth_user_id": who.identity,
        "langgraph_auth_permissions": list(who.permissions),
    }


def pid_alive(worker_id: str) -> bool:
    """Whether the process named in a worker id of this host still exists.

    Our own pid under another worker id is a previous life of this process's pid (a container
    restarted as pid 1, say): dead.
    """
    try:
        pid = int(worker_id.split("/")[1])
        if pid == os.getpid():
            return False
        os.kill(pid, 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Execution:
    run: dict[str, Any]
    last_seq: int = 0
    """The run's last event sequence number when it was claimed."""
    task: asyncio.Task[None] | None = None
    stop_reason: str | None = None
    """``cancel``, ``lost`` or ``shutdown`` once the worker decided to stop it."""
    started: bool = False


@dataclass
class Workers:
    """The worker pool of one process."""

    settings: Settings
    pool: Pool
    hub: Hub
    graphs: dict[str, Any]
    worker_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    )

    def __post_init__(self) -> None:
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
                await asyncio.shield(self._hand_back(claiming))
                raise
            except Exception:
                for _ in range(taken):
                    self.slots.release()
                logger.exception("claiming a run failed; retrying")
                await asyncio.sleep(self.settings.poll_seconds)
                continue
            for _ in range(taken - len(claimed)):
                self.slots.release()
            for run, last_seq in claimed:
                execution = Execution(run=run, last_seq=last_seq)
                self.active[run["run_id"]] = execution
                execution.task = asyncio.create_task(self._execute(execution), name=run["run_id"])
            if not claimed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self.hub.runs_changed.wait(), timeout=self.settings.poll_seconds
                    )

    async def _claim(self, limit: int) -> list[tuple[dict[str, Any], int]]:
        async with self.pool.connection() as conn:
            return await runs.claim(conn, self.worker_id, self.settings.lease_seconds, limit=limit)

    async def _hand_back(self, claiming: asyncio.Future[list[tuple[dict[str, Any], int]]]) -> None:
        """Hand back what a claim cancelled mid-statement took: nothing will execute it here."""
        try:
            claimed = await claiming
        except Exception:
            return
        for run, _ in claimed:
            try:
                async with self.pool.connection() as conn:
                    await runs.release(conn, run["run_id"], run["attempt"], self.worker_id)
            except Exception:
                logger.exception("handing back run %s failed; its lease expires", run["run_id"])

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            if not self.active:
                continue
            # Only runs held before the renewal started can be judged by it: a run claimed while
            # it was in flight is not in its result yet, and is not lost.
            before = list(self.active.items())
            try:
                async with self.pool.connection() as conn:
                    held = await runs.renew(
                        conn,
                        self.worker_id,
                        self.settings.lease_seconds,
                        [run_id for run_id, _ in before],
                    )
            except Exception:
                logger.exception("renewing leases failed")
                continue
            for run_id, execution in before:
                mine = held.get(run_id)
                if mine is None or mine[0] != execution.run["attempt"]:
                    if execution.task and not execution.task.done():
                        self._stop(execution, "lost")
                elif mine[1]:
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

    async def _execute(self, execution: Execution) -> None:
        run = execution.run
        run_id = run["run_id"]
        execution.started = True
        try:
            if execution.stop_reason:  # stopped before it started: nothing ran yet
                raise asyncio.CancelledError
            await self._run(execution)
        except asyncio.CancelledError:
            await self._after_stop(execution)
        except LostRun:
            logger.warning("run %s was taken over by another worker", run_id)
        except Exception:
            logger.exception("run %s: bookkeeping failed; its lease will expire", run_id)
        finally:
            if self.active.get(run_id) is execution:  # not a later attempt claimed meanwhile
                del self.active[run_id]
                self.hub.forget_run(run_id)
            self.slots.release()

    async def _run(self, execution: Execution) -> None:
        run = execution.run
        run_id, attempt, thread_id = run["run_id"], run["attempt"], run["thread_id"]
        emitter = Emitter(self.pool, self.hub, run_id, attempt, thread_id)
        emitter.seq = execution.last_seq
        if run.get("stalled_attempts", 0) >= self.settings.max_attempts:
            # Attempts that saved something do not count: only a run that keeps dying at the
            # same place ends here, not one killed often while it moves on.
            message = await self._stalled_message(run)
            logger.warning("run %s: %s", run_id, message)
            await emitter.emit("error", {"error": "AttemptsExhausted", "message": message})
            await self._finish(emitter, thread_id, "error", message, values=None, interrupted=False)
            return
        await emitter.emit("metadata", {"run_id": run_id, "attempt": attempt})
        kwargs = run["kwargs"]
        graph = self.graphs[run["assistant_id"]]
        user_config = kwargs.get("config") or {}
        config: dict[str, Any] = {
            **user_config,
            "configurable": {
                **(user_config.get("configurable") or {}),
                "thread_id": thread_id,
                RECORD_TOOL_KEY: emitter.record_tool,
                PRIOR_RESULT_KEY: emitter.prior_result,
                **auth_config(kwargs.get("auth_user")),
            },
            "metadata": {**(user_config.get("metadata") or {}), "run_id": run_id},
            "recursion_limit": user_config.get("recursion_limit")
            or self.settings.limits.recursion_limit(),
        }
        sent: Counter[str] | None = None
        replayed: set[str] = set()
        try:
            async for mode, chunk in graph.astream(
                run_input(kwargs),
                config,
                stream_mode=graph_modes(kwargs.get("stream_mode") or ["values"]),
                durability="sync",
            ):
                if mode == "custom" and (call_id := replayed_call(chunk)):
                    replayed.add(call_id)
                if mode == "updates" and (
                    is_cached(chunk) or (replayed and tool_call_ids(chunk) & replayed)
                ):
                    # An update an earlier attempt already stored is not sent twice. Cached: a
                    # task that finished before that attempt died (it may have died before
                    # storing the update). Replayed: a tool call whose result was streamed but
                    # not yet checkpointed when the process died, run again; it returned its
                    # recorded result (the same message) and said so in a custom event first.
                    chunk = {k: v for k, v in chunk.items() if k != "__metadata__"}
                    if sent is None:
                        sent = await stored_updates(self.pool, run_id)
                    key = update_key(dumps(chunk))
                    if sent[key] > 0:
                        sent[key] -= 1
                        continue
                await emitter.emit(mode, chunk)
            state = await graph.aget_state(config)
        except (asyncio.CancelledError, LostRun):
            raise
        except Exception as err:
            logger.exception("run %s failed", run_id)
            message = f"{type(err).__name__}: {err}"
            await emitter.emit("error", {"error": type(err).__name__, "message": str(err)})
            await self._finish(emitter, thread_id, "error", message, values=None, interrupted=False)
            return
        interrupted = bool(state.interrupts)
        if self.settings.checkpoint_retention == "latest" and not interrupted:
            await self._compact(graph, thread_id, state)
        await self._finish(
            emitter,
            thread_id,
            "interrupted" if interrupted else "success",
            None,
            values=state.values,
            interrupted=interrupted,
            interrupts={t.id: list(t.interrupts) for t in state.tasks if t.interrupts},
        )

    async def _stalled_message(self, run: dict[str, Any]) -> str:
        """Why a run ends out of attempts, naming the step where its attempts kept dying."""
        stalled = run.get("stalled_attempts", 0)
        where = "before it saved its first checkpoint"
        try:
            state = await self.graphs[run["assistant_id"]].aget_state(
                {"configurable": {"thread_id": run["thread_id"]}}
            )
            if state.config:  # the thread has a checkpoint
                unfinished = Counter(t.name for t in state.tasks if t.result is None)
                nodes = ", ".join(
                    f"'{name}'" + (f" ({count} tasks)" if count > 1 else "")
                    for name, count in sorted(unfinished.items())
                )
                # The checkpoint's step is the one that saved it; its tasks run in the next.
                step = (state.metadata or {}).get("step")
                parts = [f"at step {step + 1} of the graph"] if isinstance(step, int) else []
                parts += [f"running {nodes}"] if nodes else []
                where = ", ".join(parts) or "at its latest checkpoint"
        except Exception:  # the message is best effort; the run ends either way
            logger.exception("reading the state of thread %s failed", run["thread_id"])
        attempts = "attempt" if stalled == 1 else f"{stalled} attempts in a row"
        return (
            f"run stopped: its last {attempts} saved no new checkpoint; each time the process "
            f"running it died or stopped renewing its lease {where}. Fix the cause, then "
            "resume the thread with a new run whose input is null."
        )

    async def _compact(self, graph: Any, thread_id: str, state: Any) -> None:
        """Keep only the thread's latest checkpoint (the run still holds the thread). A failure
        leaves the history as it was: it costs storage, not correctness."""
        saver = getattr(graph, "checkpointer", None)
        if not isinstance(saver, PooledSaver):
            return
        try:
            done = await compact_thread(self.pool, saver, graph, thread_id, state=state)
        except Exception:
            logger.exception("compacting the checkpoints of thread %s failed", thread_id)
            return
        if done.skipped:
            logger.info("checkpoints of thread %s kept: %s", thread_id, done.skipped)

    async def _finish(
        self,
        emitter: Emitter,
        thread_id: str,
        status: str,
        error: str | None,
        *,
        values: Any,
        interrupted: bool,
        interrupts: dict[str, Any] | None = None,
    ) -> None:
        """End event, run status and thread status in one transaction (fenced by the attempt)."""
        from api.serde import to_jsonable

        async with self.pool.connection() as conn, conn.transaction():
            end: dict[str, Any] = {"run_id": emitter.run_id, "status": status}
            if error:
                end["error"] = error
            await emitter.emit_on(conn, "end", end)
            await conn.execute(
                "UPDATE runs SET status = %s, error = %s, lease_until = NULL, updated_at = now()"
                " WHERE run_id = %s",
                (status, error, uuid.UUID(emitter.run_id)),
            )
            after = "interrupted" if interrupted else ("error" if status == "error" else "idle")
            await threads.refresh_status(
                conn,
                thread_id,
                after=after,
                values=to_jsonable(values) if values else None,
                interrupts=to_jsonable(interrupts) if interrupts is not None else None,
            )
        emitter.wake()
        self.hub.runs_changed.set()

    async def _after_stop(self, execution: Execution) -> None:
        run = execution.run
        reason = execution.stop_reason
        if reason == "cancel":
            emitter = Emitter(self.pool, self.hub, run["run_id"], run["attempt"], run["thread_id"])
            async with self.pool.connection() as conn:
                emitter.seq = await events.last_seq(conn, run["run_id"])
            with contextlib.suppress(LostRun):
                await self._finish(
                    emitter,
                    run["thread_id"],
                    "interrupted",
                    "cancelled on request",
                    values=None,
                    interrupted=False,
                )
        elif reason == "lost":
            logger.warning(
                "run %s attempt %s: lease lost (another worker took it over); stopped",
                run["run_id"],
                run["attempt"],
            )
        elif reason == "shutdown":
            async with self.pool.connection() as conn:
                await runs.release(conn, run["run_id"], run["attempt"], self.worker_id)
        else:
            logger.warning("run %s was cancelled from outside; its lease expires", run["run_id"])


class Emitter:
    """Numbers a run's events and stores each before anyone can read it.

    :meth:`record_tool` is the tool node's hook (``RECORD_TOOL_KEY``): it writes each execution to
    the audit log before the call's result can be checkpointed, not when its event is stored.
    """

    def __init__(self, pool: Pool, hub: Hub, run_id: str, attempt: int, thread_id: str) -> None:
        self.pool, self.hub, self.run_id, self.attempt = pool, hub, run_id, attempt
        self.thread_id = thread_id
        self.seq = 0
        self._unpublished: list[tuple[int, str, str]] = []

    async def prior_result(self, idempotency_key: str) -> dict[str, Any] | None:
        """The recorded result of a call that already executed (the tool node's hook)."""
        async with self.pool.connection() as conn:
            return await audit.prior_result(conn, self.thread_id, idempotency_key)

    async def record_tool(self, finished: dict[str, Any]) -> None:
        async with self.pool.connection() as conn:
            await audit.record_tool(
                conn,
                thread_id=self.thread_id,
                run_id=self.run_id,
                attempt=self.attempt,
                event=finished,
                args=finished.get("args"),
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
