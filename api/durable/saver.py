"""The checkpointer: LangGraph's ``AsyncPostgresSaver`` on the process's pool, without its one
lock, and for a run the service executes, one statement per step.

A step's checkpoint is written in one statement (``api.store.step_statement``), together with the
run's events emitted before it (``api.durable.event_writer``) and the task writes that came before
it (``api.durable.task_writes``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import ERROR
from psycopg import AsyncConnection

from api.durable.event_writer import CheckpointEvents
from api.durable.run_memory import NO_CHECKPOINT_KEY, HeldCheckpoint, LastWritten, NoCheckpointYet
from api.durable.stream_modes import caught_up
from api.durable.task_writes import PendingWrites, WriteBuffer
from api.platform.database import Pool, run_to_completion
from api.store.step_statement import TaskWrite, WriteRow, checkpoint_rows, step_statement

EVENTS_BARRIER_KEY = "__threadline_events_barrier"
"""In a run's ``config["configurable"]``: a function returning an async context manager that
yields a :class:`api.durable.event_writer.CheckpointEvents`. :class:`PooledSaver` enters it for
each checkpoint, takes the run's events emitted before it into the checkpoint's statement, and
reports when that statement succeeded: they are stored with it, in one commit.

The same config tells the saver to hold a task's writes for that statement too
(``api.durable.task_writes``), or to store them alone when no checkpoint comes soon. A step whose
writes were saved but not its checkpoint runs again as cached on a takeover, and LangGraph emits its
updates again; the takeover dedupe stores those an earlier attempt did not
(``api.durable.takeover``)."""


DELTA_CHANNELS_KEY = "__threadline_delta_channels"
"""In a run's ``config["configurable"]``: the names of its graph's ``DeltaChannel`` channels
(:func:`delta_channels`). LangGraph saves a step's checkpoint only after the task writes to such
a channel are stored (a delta channel is rebuilt from its writes), so those writes cannot wait
for the checkpoint to take them along: they are stored at once (``api.durable.task_writes``)."""


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


def delta_channels(graph: Any) -> frozenset[str]:
    """The names of ``graph``'s ``DeltaChannel`` channels (the built-in agent's ``messages``)."""
    channels = getattr(graph, "channels", None) or {}
    return frozenset(name for name, ch in channels.items() if isinstance(ch, DeltaChannel))


class PooledSaver(AsyncPostgresSaver):
    """``AsyncPostgresSaver`` whose lock admits as many calls at once as it may use connections,
    and that writes a run's events and task writes in the statement of its next checkpoint.

    The stock saver serializes every call behind one ``asyncio.Lock`` (needed for a single
    connection). On a pool each call takes its own connection, so a semaphore sized to the share of
    the pool set aside for checkpoints lets concurrent runs checkpoint in parallel.

    Only a run whose config carries ``EVENTS_BARRIER_KEY`` (one the service executes) has its
    events and task writes grouped; any other use is the stock saver's.
    """

    def __init__(self, pool: Pool, *, concurrency: int) -> None:
        super().__init__(pool)
        self.lock = asyncio.Semaphore(concurrency)  # type: ignore[assignment]
        self.writes = WriteBuffer(self._connection, self.release)
        """Task writes waiting for their thread's next checkpoint (``api.durable.task_writes``)."""
        self.held: dict[str, HeldCheckpoint] = {}
        """Each running run's input checkpoint (and the one after it), held back until its
        run's next statement (:class:`HeldCheckpoint`)."""
        self.written: dict[str, LastWritten] = {}
        """The last checkpoint each running run stored, while no write came after it
        (:class:`LastWritten`)."""

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        async with self.lock, cast(Pool, self.conn).connection() as conn:
            yield conn

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        writes = whole_task_writes(writes)
        if EVENTS_BARRIER_KEY not in configurable:
            return await super().aput_writes(config, writes, task_id, task_path)
        # The stock saver's rows and statements, built here rather than in a thread: a task's
        # writes are the update its event carries, which the event log serializes here too.
        upsert = all(w[0] in WRITES_IDX_MAP for w in writes)
        thread_id = configurable["thread_id"]
        rows = self._dump_writes(
            thread_id,
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        self.written.pop(str(thread_id), None)  # its latest checkpoint has pending writes now
        # The step's checkpoint waits for writes to a delta channel: no use waiting for it.
        delta = configurable.get(DELTA_CHANNELS_KEY) or ()
        soon = any(channel in delta for channel, _ in writes)
        await self.writes.add(str(thread_id), [TaskWrite(row, upsert) for row in rows], soon=soon)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config.get("configurable") or {}
        events = configurable.get(EVENTS_BARRIER_KEY)
        if events is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        thread_id = str(configurable["thread_id"])
        row, blobs, saved = checkpoint_rows(self, config, checkpoint, metadata, new_versions)
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
        latest = not configurable.get("checkpoint_ns") and not configurable.get("checkpoint_id")
        hint = configurable.get(NO_CHECKPOINT_KEY)
        if latest and isinstance(hint, NoCheckpointYet) and not hint.used:
            hint.used = True
            return None
        events = configurable.get(EVENTS_BARRIER_KEY)
        if events is not None:  # a run reading its own thread
            thread_id = str(configurable["thread_id"])
            if self.held:
                await self.release(thread_id)
            last = self.written.get(thread_id)
            if latest and last is not None and last.events is events:
                return last.tuple
        return await super().aget_tuple(config)

    def forget(self, thread_id: str) -> None:
        """Drop what this saver keeps of a run of ``thread_id``: called when its attempt ends."""
        self.held.pop(thread_id, None)
        self.written.pop(thread_id, None)

    async def _write(
        self,
        thread_id: str,
        events: Any,
        writes: PendingWrites | None,
        row: dict[str, Any],
        blobs: list[WriteRow],
        held: HeldCheckpoint | None = None,
    ) -> None:
        """The statement storing a checkpoint (``api.store.step_statement``): the run's events and
        the thread's task writes before it, and the checkpoints held back before it (``held``
        when it is the held one, else the thread's), if any."""
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
        step: CheckpointEvents,
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

    def get_next_version(self, current: str | None, channel: None) -> str:
        return next_channel_version(current)


VERSION_DIGITS = 12
"""Width of the counter in a channel version. The stock saver's ``{n:032}.{random():016}`` is 51
characters, and a checkpoint names one version per channel plus one per channel each node has
seen: short versions take about 0.9 KB off every agent step (bench/: checkpoint storage)."""


def next_channel_version(current: str | int | None) -> str:
    """The version after ``current``: ``{n:012}.{8 random hex digits}``.

    LangGraph compares versions as strings, so the counter is zero-padded to a fixed width. The
    random part keeps two forks of one checkpoint from writing different values under the same
    blob key (``checkpoint_blobs`` keeps the first, ``ON CONFLICT DO NOTHING``). Threads written
    by the stock saver carry 32-digit counters; any short version compares greater than those
    (more leading zeros, counters below 10^20), so such a thread moves on to short versions and
    its versions keep increasing.
    """
    if current is None:
        count = 0
    elif isinstance(current, int):
        count = current
    else:
        count = int(current.split(".", 1)[0])
    return f"{count + 1:0{VERSION_DIGITS}}.{random.getrandbits(32):08x}"
