"""One attempt of a run: its config, the stream loop that stores every chunk, and its end.

Every attempt passes the run's own input with the run's id in the config metadata: LangGraph then
continues from the run's last checkpoint (as with input ``None``) once one exists, and starts the
input when the previous attempt died before saving any, so no input is lost and no finished step
runs twice. Chunks an earlier attempt already stored are dropped (``api.durable.takeover``). The end
event, the run's status and the thread's status are written in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from api.auth.user import User
from api.durable.compaction import compact_thread
from api.durable.event_writer import CheckpointEvents, Emitter
from api.durable.hub import Hub
from api.durable.run_events import ErrorEvent, MetadataEvent, RunStatus, end_event
from api.durable.run_memory import run_configurable as saver_configurable
from api.durable.saver import PooledSaver
from api.durable.stream_modes import event_name, event_names
from api.durable.takeover import TakeoverDedupe
from api.engine.final_state import LastCheckpoint, ended_at
from api.engine.rollback import roll_back, rolled_back
from api.engine.run_context import run_context, run_input
from api.engine.run_outcome import ending, stalled_message
from api.engine.runtime import Runtime
from api.engine.webhook_payload import outcome as hook_outcome
from api.platform.database import run_to_completion
from api.platform.db_health import is_database_fault
from api.platform.metrics import StepTimer
from api.platform.serde import to_jsonable
from api.store import run_end
from api.store.claimed_run import ClaimedRun
from api.store.events import LostRun, is_fenced_out

logger = logging.getLogger(__name__)

ALWAYS_STORED = ("updates", "custom")
"""Stored for every run whatever it streams: the page, the audit log and replays rely on them."""


def graph_modes(requested: list[str]) -> list[str]:
    """LangGraph stream modes to run with: the requested ones plus those always stored."""
    return sorted(event_names(requested) | set(ALWAYS_STORED))


def auth_config(user: dict[str, Any] | None) -> dict[str, Any]:
    """What a graph sees of the run's caller, as on LangGraph Server: ``langgraph_auth_user``
    (dict or attribute access), its id and permissions. Nothing without authentication."""
    if not user:
        return {}
    who = User.from_result(user)
    return {
        "langgraph_auth_user": who,
        "langgraph_auth_user_id": who.identity,
        "langgraph_auth_permissions": list(who.permissions),
    }


@dataclass
class Executor:
    """Runs claimed attempts of this process's runs."""

    runtime: Runtime
    hub: Hub

    def emitter(self, run: ClaimedRun, seq: int) -> Emitter:
        return Emitter.of_run(self.runtime.pool, self.hub, run, seq)

    async def config(
        self, run: ClaimedRun, emitter: Emitter, configurable: dict[str, Any]
    ) -> dict[str, Any]:
        """The run's config: the client's (``configurable``: its part as the graph sees it,
        ``api.engine.run_context``), the thread (at the checkpoint it forks from), the graph's
        hooks, the caller."""
        kwargs = run.kwargs
        adapter = self.runtime.adapter(run.graph_id)
        user_config = kwargs.get("config") or {}
        # As LangGraph Server labels a run's config (and so its checkpoints and messages).
        labels = {
            "run_id": run.run_id,
            "thread_id": run.thread_id,
            "assistant_id": run.assistant_id,
            "graph_id": run.graph_id,
        }
        config: dict[str, Any] = {
            **user_config,
            "configurable": {
                **configurable,
                "thread_id": run.thread_id,
                **await self._start(run),
                **adapter.run_configurable(emitter),
                **auth_config(kwargs.get("auth_user")),
                **labels,
            },
            "metadata": {
                **(user_config.get("metadata") or {}),
                **labels,
                "run_attempt": run.attempt,
            },
        }
        limit = user_config.get("recursion_limit") or adapter.recursion_limit()
        if limit:
            config["recursion_limit"] = limit
        return config

    async def _start(self, run: ClaimedRun) -> dict[str, str]:
        """Where the attempt starts: the checkpoint the run forks from, until the run has saved
        one of its own (a later attempt then continues from that, as any run does)."""
        start = run.kwargs.get("checkpoint")
        if not start:
            return {}
        latest = await self.runtime.saver.aget_tuple(
            {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": ""}}
        )
        if latest is not None and (latest.metadata or {}).get("run_id") == run.run_id:
            return {}
        return dict(start)

    async def execute(self, run: ClaimedRun, last_seq: int) -> None:
        """One attempt, to its end (or until it is cancelled or loses its lease)."""
        emitter = self.emitter(run, last_seq)
        try:
            async with AsyncExitStack() as held:  # the graph a factory made, while it runs
                await self._attempt(run, emitter, held)
        finally:
            self.runtime.saver.forget(run.thread_id)
            # Stopped (cancelled, lease lost) or not: what is queued or in flight lands before
            # anything else is written for the run (or fails against the fence: lease lost).
            await emitter.close()

    async def _attempt(self, run: ClaimedRun, emitter: Emitter, held: AsyncExitStack) -> None:
        settings = self.runtime.settings
        run_id, thread_id, gid, kwargs = run.run_id, run.thread_id, run.graph_id, run.kwargs
        if run.stalled_attempts >= settings.max_attempts:
            # Attempts that saved something do not count: only a run that keeps dying at the
            # same place ends here, not one killed often while it moves on.
            message = await stalled_message(self.runtime.graphs[gid], run)
            logger.warning("run %s: %s", run_id, message)
            error: ErrorEvent = {"error": "AttemptsExhausted", "message": message}
            await emitter.emit("error", error)
            await self.finish(emitter, run, "error", message, failure=error)
            return
        if undone := rolled_back(kwargs):
            await roll_back(self.runtime.pool, thread_id, undone)
        started: MetadataEvent = {"run_id": run_id, "attempt": run.attempt}
        await emitter.emit("metadata", started)
        if run.attempt > 1:
            # A takeover: the attempt before died, and this one may die at the same step before
            # any checkpoint takes the event along. Stored now, each attempt's start is in the log.
            await emitter.barrier()
        context, configurable = run_context(self.runtime.graphs[gid], kwargs)
        config = cast(RunnableConfig, await self.config(run, emitter, configurable))
        dedupe = TakeoverDedupe(self.runtime.pool, run_id, self.runtime.adapter(gid).replayed_call)
        steps = StepTimer()

        @asynccontextmanager
        async def checkpoint_events() -> AsyncIterator[CheckpointEvents]:
            steps.checkpoint()  # the checkpointer's, for each checkpoint
            async with emitter.with_checkpoint() as step:
                yield step

        # What the checkpointer needs of the run (``api.durable.run_memory.SaverRun``).
        config["configurable"].update(
            saver_configurable(
                checkpoint_events, self.runtime.graphs[gid], no_checkpoint=run.no_checkpoint
            )
        )
        watch = LastCheckpoint(graph_modes(kwargs.get("stream_mode") or ["values"]))
        try:
            graph = await held.enter_async_context(self.runtime.run_graph(gid, config, context))
            try:
                subgraphs = bool(kwargs.get("stream_subgraphs"))
                async for item in graph.astream(
                    run_input(kwargs),
                    config,
                    context=context,
                    stream_mode=cast(Any, watch.stream_modes()),
                    subgraphs=subgraphs,
                    # The graph's output schema, as LangGraph Server streams it: not the
                    # private channels a graph keeps (LangChain's middleware bookkeeping).
                    output_keys=graph.output_channels,
                    durability="sync",
                    interrupt_before=kwargs.get("interrupt_before"),
                    interrupt_after=kwargs.get("interrupt_after"),
                ):
                    parts = cast(tuple[Any, ...], item)
                    ns: tuple[str, ...] = parts[0] if subgraphs else ()
                    mode, chunk = parts[-2:]
                    if not watch.passes(mode, ns, chunk):
                        continue
                    event = event_name(mode, ns)
                    if not ns:
                        steps.feed(mode, chunk)
                    if await dedupe.repeated(event, chunk):
                        continue
                    if mode == "updates" and isinstance(chunk, dict):
                        chunk = {k: v for k, v in chunk.items() if k != "__metadata__"}
                    await emitter.emit(event, chunk)
            finally:  # the input checkpoint, if no later one took it along (api.durable.saver)
                await self.runtime.saver.release(thread_id)
            state = await watch.state(graph, config)
        except LostRun:
            raise
        except Exception as err:
            if emitter.failed is not None or is_database_fault(err):
                # The event log could not be written, or the database went away: not the run's
                # own error. The worker hands it back (api.engine.worker), and a later attempt
                # continues it from its last checkpoint.
                raise
            logger.exception("run %s failed", run_id)
            failed: ErrorEvent = {"error": type(err).__name__, "message": str(err)}
            await emitter.emit("error", failed)
            message = f"{type(err).__name__}: {err}"
            await self.finish(emitter, run, "error", message, failure=failed)
            return
        interrupted, unfinished = ending(graph, state, kwargs)
        if unfinished is not None:  # not a success (api.engine.run_outcome)
            logger.error("run %s: %s", run_id, unfinished)
            stopped: ErrorEvent = {"error": "GraphNotFinished", "message": unfinished}
            await emitter.emit("error", stopped)
            await self.finish(emitter, run, "error", unfinished, failure=stopped)
            return
        if settings.checkpoint_retention == "latest" and not interrupted:
            await self._compact(graph, thread_id, state)
        await self.finish(
            emitter,
            run,
            # As on LangGraph Server: a run that paused at an interrupt or a breakpoint did all
            # it could and ends ``success``; its thread is ``interrupted`` until answered. A run
            # stopped from outside (cancelled, or by multitask_strategy) is ``interrupted``.
            "success",
            None,
            values=state.values,
            values_at=None if interrupted else ended_at(state),
            interrupted=interrupted,
            interrupts={t.id: list(t.interrupts) for t in state.tasks if t.interrupts},
        )

    async def _compact(self, graph: Any, thread_id: str, state: Any) -> None:
        """Keep only the thread's latest checkpoint (the run still holds the thread). A failure
        leaves the history as it was: it costs storage, not correctness."""
        saver = getattr(graph, "checkpointer", None)
        if not isinstance(saver, PooledSaver):
            return
        try:
            done = await compact_thread(self.runtime.pool, saver, graph, thread_id, state=state)
        except Exception:
            logger.exception("compacting the checkpoints of thread %s failed", thread_id)
            return
        if done.skipped:
            logger.info("checkpoints of thread %s kept: %s", thread_id, done.skipped)

    async def finish(
        self,
        emitter: Emitter,
        run: ClaimedRun,
        status: RunStatus,
        error: str | None,
        *,
        values: Any = None,
        values_at: str | None = None,
        interrupted: bool = False,
        interrupts: dict[str, Any] | None = None,
        failure: ErrorEvent | None = None,
    ) -> None:
        """End event, run and thread status, webhook in one statement (``api.store.run_end``,
        fenced by the attempt), run to its end once sent (see ``PooledSaver.aput``)."""
        ends: dict[str, Any] = {
            "thread_id": run.thread_id,
            "status": status,
            "error": error,
            "after": "interrupted" if interrupted else ("error" if status == "error" else "idle"),
            "values": values or None,  # written by store.rows.storable_json, messages as they are
            "values_at": values_at,
            "interrupts": to_jsonable(interrupts) if interrupts is not None else None,
        }
        ends["hook"] = await hook_outcome(self.runtime, run, status, error, values, failure)
        end = end_event(emitter.run_id, status, error)
        async with self.runtime.pool.connection() as conn:
            try:
                now = await run_to_completion(
                    emitter.emit_last("end", end, lambda rows: run_end.finish(conn, rows, **ends))
                )
            except Exception as err:
                if is_fenced_out(err):
                    raise LostRun(emitter.run_id) from err
                raise
        emitter.wake()
        if now == "busy":  # a run queued behind this one: claim it now, not at the next poll
            self.hub.runs_changed.set()
