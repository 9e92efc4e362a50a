"""The checkpointer: LangGraph's ``AsyncPostgresSaver`` on the process's pool, as many calls at
once as it may use connections (``api.durable.saver_pool``), and for a run the service executes,
one statement per step.

A step's checkpoint is written in one statement (``api.store.checkpoint_tables.step``), together
with the run's events emitted before it (``api.durable.event_writer``) and the task writes that
came before it (``api.durable.task_writes``). The run says what the saver needs of it in its
config (``api.durable.run_memory.SaverRun``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import ERROR
from psycopg import AsyncConnection

from api.durable.run_memory import EventsBarrier, HeldCheckpoint, LastWritten, StepEvents, saver_run
from api.durable.saver_pool import DEFAULT_DELTA_CACHE_ITEMS, SaverPool
from api.durable.stream_modes import caught_up
from api.durable.task_writes import PendingWrites, WriteBuffer
from api.platform.database import Pool, run_to_completion
from api.store.checkpoint_tables.rows import BlobRow, checkpoint_rows, write_rows
from api.store.checkpoint_tables.step import TaskWrite, step_statement

ERROR_SOURCE_NODE = "__error_source_node__"
"""LangGraph's control write naming a failed task's node for its error handler (with the
``ERROR`` write), kept with it; LangGraph exports no public name for it."""


def whole_task_writes(writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    """A task's writes as stored: all of them, or only its error when it did not finish.

    LangGraph saves a task that failed or was cancelled with the writes it made so far and its
    ``ERROR`` (``PregelRunner.commit``), and a later run reads any task with an output write as
    finished. A node's update written before its conditional edge ran, with the edge cut off
    (a sibling task failed because the database went away, and LangGraph cancelled the rest of
    the step), would then end the graph on the next attempt with the rest of its work undone:
    a false ``success``. A task's outputs are stored only when it finished; a task that did not
    keeps its control writes (error, interrupt, resume values), reads as unfinished and runs
    again, whole, on resume (``tests/api/test_cut_tasks.py``)."""
    if not any(channel == ERROR for channel, _ in writes):
        return writes
    return [(c, v) for c, v in writes if c in WRITES_IDX_MAP or c == ERROR_SOURCE_NODE]


class PooledSaver(SaverPool):
    """The stock saver on the pool (:class:`SaverPool`) that writes a run's events and task
    writes in the statement of its next checkpoint.

    Only a run whose config carries a ``SaverRun`` (one the service executes) has its events
    and task writes grouped; any other call is the stock saver's.
    """

    def __init__(
        self,
        pool: Pool,
        *,
        concurrency: int,
        serde: SerializerProtocol | None = None,
        delta_cache_items: int = DEFAULT_DELTA_CACHE_ITEMS,
    ) -> None:
        super().__init__(
            pool, concurrency=concurrency, serde=serde, delta_cache_items=delta_cache_items
        )
        self.writes = WriteBuffer(self._connection, self.release)
        """Task writes waiting for their thread's next checkpoint (``api.durable.task_writes``)."""
        self.held: dict[str, HeldCheckpoint] = {}
        """Each running run's input checkpoint (and the one after it), held back until its
        run's next statement (:class:`HeldCheckpoint`)."""
        self.written: dict[str, LastWritten] = {}
        """The last checkpoint each running run stored, while no write came after it
        (:class:`LastWritten`)."""

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        writes = whole_task_writes(writes)
        run = saver_run(config["configurable"])
        if run is None:
            return await super().aput_writes(config, writes, task_id, task_path)
        # The stock saver's rows and statements, built here rather than in a thread: a task's
        # writes are the update its event carries, which the event log serializes here too.
        upsert = all(w[0] in WRITES_IDX_MAP for w in writes)
        rows = write_rows(self.serde, config, task_id, task_path, writes)
        thread_id = str(config["configurable"]["thread_id"])
        self.written.pop(thread_id, None)  # its latest checkpoint has pending writes now
        # The step's checkpoint waits for writes to a delta channel: no use waiting for it.
        soon = any(channel in run.delta_channels for channel, _ in writes)
        await self.writes.add(thread_id, [TaskWrite(row, upsert) for row in rows], soon=soon)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config.get("configurable") or {}
        run = saver_run(configurable)
        if run is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        events = run.events
        thread_id = str(configurable["thread_id"])
        row, blobs, saved = checkpoint_rows(self.serde, config, checkpoint, metadata, new_versions)
        held = self.held.get(thread_id)
        if configurable["checkpoint_ns"]:
            await caught_up()  # the step's chunks, for this statement to take along
            if held is not None:  # a subgraph's: the parent's held ones are stored first
                await self.release(thread_id)
        elif metadata.get("source") == "input":
            self.held[thread_id] = HeldCheckpoint(row, blobs, events)
            return saved
        elif held is not None and held.events is events and held.follows_input(row, metadata):
            self.held[thread_id] = held.then(row, blobs)
            return saved
        # Taken before waiting for the events' lock and a connection: under load that wait
        # outlasts the delay, and the writes would go in a transaction of their own (waiting
        # for the same lock and pool) rather than in this one.
        await self._write(thread_id, events, self.writes.take(thread_id), row, blobs)
        if last := LastWritten.of(events, saved, checkpoint, row):
            self.written[thread_id] = last
        else:
            self.written.pop(thread_id, None)
        return saved

    async def release(self, thread_id: str, writes: PendingWrites | None = None) -> None:
        """Store the checkpoints held back for ``thread_id``, if any are (no later statement
        took them along), with the thread's task writes (``writes``, else those queued):
        called when a run's graph stops, before anything reads its state, and for task writes
        no checkpoint took along in time (``api.durable.task_writes``), which go alone if none
        are."""
        held = self.held.pop(thread_id, None)
        if held is None:
            if writes is not None:  # none held, or a checkpoint's statement took them meanwhile
                await self.writes.write_alone(writes)
            return
        self.written.pop(thread_id, None)
        writes = writes or self.writes.take(thread_id)
        await self._write(thread_id, held.events, writes, held.row, held.blobs, held)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config.get("configurable") or {}
        run = saver_run(configurable)
        if run is not None:  # a run reading its own thread
            latest = not (configurable.get("checkpoint_ns") or configurable.get("checkpoint_id"))
            hint = run.no_checkpoint
            if latest and hint is not None and not hint.used:
                hint.used = True
                return None
            thread_id = str(configurable["thread_id"])
            if self.held:
                await self.release(thread_id)
            last = self.written.get(thread_id)
            if latest and last is not None and last.events is run.events:
                return last.tuple
        return await super().aget_tuple(config)

    def forget(self, thread_id: str) -> None:
        """Drop what this saver keeps of a run of ``thread_id``: called when its attempt ends."""
        self.held.pop(thread_id, None)
        self.written.pop(thread_id, None)

    async def _write(
        self,
        thread_id: str,
        events: EventsBarrier,
        writes: PendingWrites | None,
        row: dict[str, Any],
        blobs: list[BlobRow],
        held: HeldCheckpoint | None = None,
    ) -> None:
        """The statement storing a checkpoint (``api.store.checkpoint_tables.step``): the run's
        events and the thread's task writes before it, and the checkpoints held back before it
        (``held`` when it is the held one, else the thread's), if any."""
        if held is None:
            earlier = self.held.pop(thread_id, None)
            if earlier is not None and earlier.events is events:
                held = earlier.then(row, blobs)
            # else: another run's, which stopped without storing them: not this run's
        sent = False
        try:
            async with events() as step, self._connection() as conn:
                sql, params = step_statement(
                    events=step.take(),
                    writes=writes.rows if writes else [],
                    blobs=held.blobs if held else blobs,
                    checkpoint=row,
                    earlier=held.earlier if held else [],
                )
                sent = True
                # Once sent, the statement runs to its end even when the run is cancelled
                # meanwhile (the cancellation is raised after it), and its outcome is reported.
                await run_to_completion(self._store(conn, sql, params, step, writes))
        except BaseException:
            if writes is not None and not sent:  # no statement carried them: on their own
                self.writes.store_alone(writes)
            raise

    @staticmethod
    async def _store(
        conn: AsyncConnection[Any],
        sql: str,
        params: dict[str, Any],
        step: StepEvents,
        writes: PendingWrites | None,
    ) -> None:
        try:
            await conn.execute(sql, params, binary=True)
        except BaseException as err:  # nothing stored: the writes' callers get the error too
            if writes is not None:
                writes.failed(err)
            raise
        step.stored()
        if writes is not None:
            writes.stored()
