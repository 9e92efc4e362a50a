"""What the checkpointer (``api.durable.saver``) knows of a run the service executes: what the run
tells it (:class:`SaverRun`, in its config), and what it keeps of the run between its calls (the
input checkpoint and the one after it, held back; the last checkpoint it stored). Each is the
run's own (named by its :attr:`SaverRun.events` function) and is dropped when the attempt ends
(``PooledSaver.forget``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple

from api.store.checkpoint_tables.rows import BlobRow, is_delta_snapshot
from api.store.events import EventRows

RUN_KEY = "__threadline_run"
"""In a run's ``config["configurable"]``: its :class:`SaverRun`. LangGraph hands the
checkpointer every call's config, and ``configurable`` is its public place for per-run values."""


class StepEvents(Protocol):
    """A run's events as a checkpoint's statement takes them along
    (``api.durable.event_writer.CheckpointEvents``)."""

    def take(self) -> EventRows | None:
        """The events queued so far, now the statement's (``None``: none)."""

    def stored(self) -> None:
        """The statement that took them committed."""


EventsBarrier = Callable[[], AbstractAsyncContextManager[StepEvents]]
"""Enters the run's event log for one checkpoint (``Emitter.with_checkpoint``)."""


@dataclass
class NoCheckpointYet:
    """A run's thread had no checkpoint when the run was committed, claimed at once by the
    process that executes it, or when its first attempt was claimed from the queue: LangGraph's
    first read of the thread, as its loop starts, is answered (nothing) without a query.
    Nothing saves one in between: another run on the thread waits for this one, and updating or
    copying its state is refused while a run is active (pending or running).
    Answered once; any later read goes to the database."""

    used: bool = False


@dataclass(frozen=True)
class SaverRun:
    """What the checkpointer needs of a run the service executes, in its config (``RUN_KEY``);
    :func:`run_configurable` makes it. A run without one is checkpointed as the stock saver
    does."""

    events: EventsBarrier
    """Entered for each checkpoint: the saver takes the run's events emitted before it into the
    checkpoint's statement and reports when that statement succeeded, so they are stored with
    it, in one commit. It also names the run: what the saver holds back or remembers is that
    run's only. The saver holds a task's writes for the same statement
    (``api.durable.task_writes``), or stores them alone when no checkpoint comes soon. A step
    whose writes were saved but not its checkpoint runs again as cached on a takeover, and
    LangGraph emits its updates again; the takeover dedupe stores those an earlier attempt did
    not (``api.durable.takeover``)."""
    delta_channels: frozenset[str] = frozenset()
    """The graph's ``DeltaChannel`` channels (:func:`delta_channels`). LangGraph saves a step's
    checkpoint only after the task writes to such a channel are stored (it is rebuilt from its
    writes), so those cannot wait for the checkpoint to take them along: they are stored at
    once (``api.durable.task_writes``)."""
    no_checkpoint: NoCheckpointYet | None = None
    """The thread had no checkpoint when the run was claimed (:class:`NoCheckpointYet`)."""


def delta_channels(graph: Any) -> frozenset[str]:
    """The names of ``graph``'s ``DeltaChannel`` channels (the built-in agent's ``messages``)."""
    channels = getattr(graph, "channels", None) or {}
    return frozenset(name for name, ch in channels.items() if isinstance(ch, DeltaChannel))


def run_configurable(
    events: EventsBarrier, graph: Any = None, *, no_checkpoint: bool = False
) -> dict[str, SaverRun]:
    """The entry to put in the ``config["configurable"]`` of a run the service executes on
    ``graph``, whose events ``events`` hands to each checkpoint; ``no_checkpoint``: its thread
    has none yet."""
    hint = NoCheckpointYet() if no_checkpoint else None
    return {RUN_KEY: SaverRun(events, delta_channels(graph), hint)}


def saver_run(configurable: Mapping[str, Any]) -> SaverRun | None:
    """The run's :class:`SaverRun`; None: not a run the service executes."""
    run = configurable.get(RUN_KEY)
    return run if isinstance(run, SaverRun) else None


@dataclass
class HeldCheckpoint:
    """A run's input checkpoint and the one after it, stored with the run's next statement.

    LangGraph saves the input (``source: input``), then runs only ``__start__``, which passes it
    on, and saves the result before any node runs: two commits back to back, round trips that
    every run waits for before its first node. Both are held back and stored in the statement
    of whatever the run stores next of its thread: its next checkpoint, a task's writes no
    checkpoint took along in time (``api.durable.task_writes``), or on their own by
    :meth:`api.durable.saver.PooledSaver.release` when the graph stops first or reads its thread.
    Nothing of a node's is durable before them, and a crash in between loses no work: the
    run's next attempt finds no checkpoint of its own and starts from its input again, as after
    a crash before the first save. (Events may be stored before them: a node's first event is
    shown at once, ``api.durable.event_writer.MID_STEP``.)"""

    row: dict[str, Any]
    blobs: list[BlobRow]
    """The blobs of this checkpoint and of those in ``earlier``."""
    events: EventsBarrier
    """The run's :attr:`SaverRun.events`: a checkpoint is held for that run only."""
    earlier: list[dict[str, Any]] = field(default_factory=list)
    """The held checkpoint before this one (the input), if any."""

    def follows_input(self, row: dict[str, Any], metadata: CheckpointMetadata) -> bool:
        """Whether ``row`` is the loop's checkpoint right after this held input checkpoint
        (``__start__``'s), to be held with it."""
        return (
            not self.earlier
            and metadata.get("source") == "loop"
            and row["parent_id"] == self.row["checkpoint_id"]
        )

    def then(self, row: dict[str, Any], blobs: list[BlobRow]) -> HeldCheckpoint:
        """This checkpoint and ``row`` after it, both held."""
        return HeldCheckpoint(row, self.blobs + blobs, self.events, [*self.earlier, self.row])


@dataclass
class LastWritten:
    """The checkpoint a run stored last, as the stock saver reads it back: a run's graph reads
    its thread's state when it stops (``aget_state``), and that is this checkpoint, with no
    pending writes, unless a task wrote since (an interrupt: then the database is read). Not
    kept for delta channels, which the stock saver rebuilds from their writes."""

    events: EventsBarrier
    """The run's :attr:`SaverRun.events`: answered to that run only."""
    tuple: CheckpointTuple

    @classmethod
    def of(
        cls,
        events: EventsBarrier,
        saved: RunnableConfig,
        checkpoint: Checkpoint,
        row: dict[str, Any],
    ) -> LastWritten | None:
        """What a run's read of the checkpoint it just stored (``row``, named by ``saved``)
        returns; None for a subgraph's, or one with delta channels."""
        configurable = saved["configurable"]
        if configurable["checkpoint_ns"] or any(
            is_delta_snapshot(v) for v in checkpoint["channel_values"].values()
        ):
            return None
        parent = row["parent_id"]
        return cls(
            events,
            CheckpointTuple(
                config=saved,
                checkpoint=checkpoint,
                metadata=row["metadata"].obj,
                parent_config=(
                    {"configurable": {**configurable, "checkpoint_id": parent}} if parent else None
                ),
                pending_writes=[],
            ),
        )
