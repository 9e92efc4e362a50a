"""``add_messages`` over a batch of writes in one pass: the reducer a ``DeltaChannel`` of
messages needs.

LangGraph's ``DeltaChannel`` calls ``reducer(state, [write, ...])`` and, when it rebuilds a
checkpoint's value, hands it every write since the last snapshot in one batch (up to
``snapshot_frequency`` of them). Folding ``add_messages`` over the batch copies and indexes the
whole list once per write, so a read of a long thread costs ``writes * messages``. This does what
that fold does (same result, same errors) in one pass over the list plus the writes:

- a message whose id is already there replaces it in place; a new id is appended;
- a ``RemoveMessage`` takes its id out at the end of its own write (a later message of the same
  write with that id keeps it, in place), and one for an id that is not there raises, as
  ``add_messages`` does;
- ``RemoveMessage(REMOVE_ALL_MESSAGES)`` makes the list what follows it in its write;
- dicts, tuples and chunks are coerced, and messages without an id get one, as
  ``add_messages`` does.

Removed entries are left as holes until the end, so a removal is not a copy of the list.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

__all__ = ["add_messages_batch"]

_HOLE: Any = object()


def _coerce(write: Any) -> list[Any]:
    """``write`` as a list of messages, each with an id (what ``add_messages`` does first)."""
    messages: list[Any] = write if isinstance(write, list) else [write]
    if not all(
        issubclass(t, BaseMessage) and not issubclass(t, BaseMessageChunk)
        for t in set(map(type, messages))
    ):
        messages = [message_chunk_to_message(m) for m in convert_to_messages(messages)]
    for m in messages:
        if m.id is None:
            m.id = str(uuid.uuid4())
    return messages


class _Merge:
    """The list being built, its index by id (the last position of an id, as ``add_messages``'s
    ``{m.id: i for ...}`` has it) and how many entries are not holes."""

    def __init__(self, messages: list[Any]) -> None:
        self._reset(messages)

    def _reset(self, messages: list[Any]) -> None:
        self.items = messages
        self.index = {m.id: i for i, m in enumerate(messages)}
        self.live = len(messages)

    def apply(self, write: list[Any]) -> None:
        removing: set[Any] = set()
        for m in write:
            at = self.index.get(m.id)
            if at is not None:
                if isinstance(m, RemoveMessage):
                    removing.add(m.id)
                else:
                    removing.discard(m.id)
                    self.items[at] = m
            elif isinstance(m, RemoveMessage):
                raise ValueError(
                    f"Attempting to delete a message with an ID that doesn't exist ('{m.id}')"
                )
            else:
                self.index[m.id] = len(self.items)
                self.items.append(m)
                self.live += 1
        if removing:
            self._remove(removing)

    def _remove(self, ids: set[Any]) -> None:
        if self.live != len(self.index):
            # An id is in the list twice (a REMOVE_ALL's tail can hold that): add_messages
            # removes every copy, so do as it does, with a pass over the list.
            self._reset([m for m in self.items if m is not _HOLE and m.id not in ids])
            return
        for message_id in ids:
            self.items[self.index.pop(message_id)] = _HOLE
            self.live -= 1

    def result(self) -> list[AnyMessage]:
        if self.live == len(self.items):
            return self.items
        return [m for m in self.items if m is not _HOLE]


def add_messages_batch(left: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    """``left`` with ``writes`` merged in order, equal to folding ``add_messages`` over them."""
    merge = _Merge(list(_coerce(left)))
    for write in writes:
        messages = _coerce(write)
        cut = None
        for i, m in enumerate(messages):
            if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES:
                cut = i
        if cut is not None:
            merge = _Merge(list(messages[cut + 1 :]))
        else:
            merge.apply(messages)
    return merge.result()
