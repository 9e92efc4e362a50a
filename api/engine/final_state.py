"""The thread's state at the end of an attempt, taken from the attempt's own stream when it can be.

A run's end needs the thread's latest values (the thread's ``values``, the webhook) and whether
it stopped at an interrupt or with tasks left (``api.engine.run_outcome.ending``). Reading them
with ``graph.aget_state`` loads the latest checkpoint again: on a long thread that is the whole
history deserialized a second time (and, for a ``DeltaChannel``, replayed again), which is most
of what a run on such a thread costs beyond LangGraph alone.

So the attempt also streams LangGraph's ``checkpoints`` mode, and keeps the root graph's last
one: the values LangGraph read from its channels when it saved its last checkpoint (the same
``read_channels`` over the same keys ``aget_state`` reads), with the tasks left. When that
checkpoint has no task left, the graph reached its end and nothing can be pending, so that is
the state. Otherwise (an interrupt, a breakpoint, tasks left: what happened after that
checkpoint lives in its pending writes) or when the attempt saved no checkpoint (a takeover of a
run whose graph had already ended, a run without a checkpointer), the state is read as before.
The ``checkpoints`` chunks are stored and sent only when the client asked for them.

A graph that reached its end has its delta channel values kept in memory for the next read of
that checkpoint (``api.durable.delta_cache``): the next run on the thread starts from them. A
paused one's are not: what ``aget_state`` answers for it includes the pending writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from api.durable.saver_pool import SaverPool

WATCHED = "checkpoints"


@dataclass(frozen=True)
class Finished:
    """What the run's end reads of a ``StateSnapshot``, for a graph that reached its end."""

    values: Any
    config: RunnableConfig
    next: tuple[str, ...] = ()
    tasks: tuple[Any, ...] = ()
    interrupts: tuple[Any, ...] = ()


def ended_at(state: Any) -> str | None:
    """The root checkpoint whose values ``state`` holds when the graph ended there (a
    :class:`Finished`), else None: the thread's stored values can then answer for it
    (``api.store.kept_state``)."""
    if not isinstance(state, Finished):
        return None
    configurable = state.config.get("configurable") or {}
    if configurable.get("checkpoint_ns"):
        return None
    checkpoint_id = configurable.get("checkpoint_id")
    return str(checkpoint_id) if checkpoint_id else None


def latest(config: RunnableConfig) -> RunnableConfig:
    """``config`` naming its thread's latest checkpoint."""
    configurable = {
        k: v for k, v in (config.get("configurable") or {}).items() if k != "checkpoint_id"
    }
    return cast(RunnableConfig, {**config, "configurable": configurable})


class LastCheckpoint:
    """Watches an attempt's stream for its root graph's last checkpoint."""

    def __init__(self, modes: list[str]) -> None:
        self.modes = modes
        self.last: dict[str, Any] | None = None

    def stream_modes(self) -> list[str]:
        """The modes to run the graph with: the run's, and ``checkpoints``."""
        return self.modes if WATCHED in self.modes else [*self.modes, WATCHED]

    def passes(self, mode: str, namespace: tuple[str, ...], chunk: Any) -> bool:
        """Notes a root checkpoint; whether the chunk is one the run streams."""
        if mode == WATCHED and not namespace and isinstance(chunk, dict):
            self.last = chunk
        return mode in self.modes

    async def state(self, graph: Any, config: RunnableConfig) -> Any:
        """The thread's latest state (not the checkpoint a fork of the run's ``config`` started
        from): the last checkpoint's when the graph ended there, and then its delta channel
        values are kept for the next read of that checkpoint (the next run's start, a state
        read: ``api.durable.delta_cache``)."""
        last = self.last
        if last is None or last.get("next") or last.get("tasks"):
            # Not kept: a paused thread's state has its checkpoint's pending writes applied
            # (tasks that finished beside the interrupted one, writes of no task), so it is not
            # the checkpoint's own value; a later read would apply them twice.
            return await graph.aget_state(latest(config))
        state = Finished(values=last.get("values"), config=last["config"])
        saver = getattr(graph, "checkpointer", None)
        if isinstance(saver, SaverPool):
            saver.remember_state(graph, state)
        return state
