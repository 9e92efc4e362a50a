"""What the checkpointer keeps of a running run between its calls (``api.durable.saver``): the input
checkpoint and the one after it, held back; the hint that the thread has none yet; the last
checkpoint it stored. Each is the run's own (named by its ``EVENTS_BARRIER_KEY`` function, or
carried in its config) and is dropped when the attempt ends (``PooledSaver.forget``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from api.store.step_statement import WriteRow

NO_CHECKPOINT_KEY = "__threadline_no_checkpoint"
"""In a run's ``config["configurable"]``: a :class:`NoCheckpointYet`."""


@dataclass
class NoCheckpointYet:
    """A run's thread had no checkpoint when the run was committed, claimed at once by the
    process that executes it, or when its first attempt was claimed from the queue: LangGraph's
    first read of the thread, as its loop starts, is answered (nothing) without a query.
    Nothing saves one in between: another run on the thread waits for this one, and updating or
    copying its state is refused while a run is active (pending or running).
    Answered once; any later read goes to the database."""

    used: bool = False


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
    blobs: list[WriteRow]
    """The blobs of this checkpoint and of those in ``earlier``."""
    events: Any
    """The run's ``EVENTS_BARRIER_KEY`` function: a checkpoint is held for that run only."""
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

    def then(self, row: dict[str, Any], blobs: list[WriteRow]) -> HeldCheckpoint:
        """This checkpoint and ``row`` after it, both held."""
        return HeldCheckpoint(row, self.blobs + blobs, self.events, [*self.earlier, self.row])


@dataclass
class LastWritten:
    """The checkpoint a run stored last, as the stock saver reads it back: a run's graph reads
    its thread's state when it stops (``aget_state``), and that is this checkpoint, with no
    pending writes, unless a task wrote since (an interrupt: then the database is read). Not
    kept for delta channels, which the stock saver rebuilds from their writes."""

    events: Any
    """The run's ``EVENTS_BARRIER_KEY`` function: answered to that run only."""
    tuple: CheckpointTuple

    @classmethod
    def of(
        cls, events: Any, saved: RunnableConfig, checkpoint: Checkpoint, row: dict[str, Any]
    ) -> LastWritten | None:
        """What a run's read of the checkpoint it just stored (``row``, named by ``saved``)
        returns; None for a subgraph's, or one with delta channels."""
        configurable = saved["configurable"]
        if configurable["checkpoint_ns"] or any(
            isinstance(v, _DeltaSnapshot) for v in checkpoint["channel_values"].values()
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
