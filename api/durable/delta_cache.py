"""The values of a thread's ``DeltaChannel`` channels at its latest checkpoint, kept in memory
between runs, so the next read of that checkpoint does not rebuild them.

LangGraph rebuilds a delta channel's value from storage on every read: the nearest snapshot
(the whole list, deserialized message by message) and the writes after it
(``BaseCheckpointSaver.get_delta_channel_history``). On a long conversation that is most of what
a run costs, and it grows with the conversation. But the process that ended a run holds the
value its graph had at the checkpoint it saved last: :meth:`DeltaCache.remember` keeps it, and
when a read asks for the history of that very checkpoint (the next run's start, a state read),
:meth:`DeltaCache.history` answers with it as the seed and no writes after it, the shape the
saver's answer has for a checkpoint that is itself a snapshot. ``DeltaChannel.from_checkpoint``
takes a plain value as its seed (documented: "plain value ... use directly").

It is keyed by thread and checkpoint id, and a checkpoint id names one checkpoint forever: a
thread that moved on (another replica's run, a state update, a fork, a rollback) is read from
storage as before. Only root checkpoints are kept. Each read gets a new list (a shallow copy),
so a graph that appends to its state in place changes no other reader's. Entries are dropped
oldest first past ``max_items`` list items in all (each value counts its length, others 1).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory


def _weight(value: Any) -> int:
    return len(value) if isinstance(value, list | dict | set | tuple) else 1


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, list | dict | set) else value


@dataclass(frozen=True)
class _Entry:
    checkpoint_id: str
    values: Mapping[str, Any]
    weight: int


class DeltaCache:
    """Delta channel values at each cached thread's latest checkpoint, oldest used first out."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self.entries: OrderedDict[str, _Entry] = OrderedDict()
        self.items = 0

    def remember(self, thread_id: str, checkpoint_id: str, values: Mapping[str, Any]) -> None:
        """The delta channels' ``values`` at the root checkpoint ``checkpoint_id``."""
        self.forget(thread_id)
        weight = sum(_weight(v) for v in values.values())
        if not values or weight > self.max_items:
            return
        self.entries[thread_id] = _Entry(checkpoint_id, dict(values), weight)
        self.items += weight
        while self.items > self.max_items:
            _, dropped = self.entries.popitem(last=False)
            self.items -= dropped.weight

    def history(
        self, thread_id: str, checkpoint_id: str, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory] | None:
        """The history of ``channels`` at that checkpoint, if it is the one kept for the thread
        with all of them; else None (read it from storage)."""
        entry = self.entries.get(thread_id)
        if entry is None or entry.checkpoint_id != checkpoint_id:
            return None
        if any(channel not in entry.values for channel in channels):
            return None
        self.entries.move_to_end(thread_id)
        return {c: {"writes": [], "seed": _copy(entry.values[c])} for c in channels}

    def forget(self, thread_id: str) -> None:
        entry = self.entries.pop(thread_id, None)
        if entry is not None:
            self.items -= entry.weight
