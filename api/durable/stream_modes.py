"""What stream chunks are: event names per stream mode, and LangGraph's cached re-emissions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

SUBGRAPH_CHUNK_TURNS = 8
"""Event-loop turns a subgraph's checkpoint waits for its step's chunks (:func:`caught_up`)."""


def event_names(modes: Iterable[str]) -> set[str]:
    """LangGraph stream modes (and SSE event names) for requested ``stream_mode`` values:
    ``messages-tuple``, ``messages`` and ``events`` are all LangGraph's ``messages`` mode, stored
    as ``messages`` events (``api.http.messages_mode`` derives what the last two send)."""
    return {"messages" if m in ("messages", "messages-tuple", "events") else m for m in modes}


def event_name(mode: str, namespace: tuple[str, ...] = ()) -> str:
    """The event a chunk is stored and sent as: its mode, and for a subgraph's chunk its
    namespace after it, as LangGraph Server names it (``updates|child:<task id>``)."""
    return "|".join((mode, *namespace)) if namespace else mode


def base_mode(event: str) -> str:
    """The stream mode of an event name (``updates|child:1`` → ``updates``)."""
    return event.partition("|")[0]


def is_cached(data: Any) -> bool:
    """An update LangGraph re-emits on resume for a task it did not run again."""
    return isinstance(data, dict) and bool((data.get("__metadata__") or {}).get("cached"))


def tool_call_ids(data: Any) -> set[str]:
    """Tool call ids of the tool results in an ``updates`` chunk,
    ``{node: {"messages": [...]}}``."""
    found: set[str] = set()
    if not isinstance(data, dict):
        return found
    for update in data.values():
        messages = update.get("messages") if isinstance(update, dict) else None
        for message in messages if isinstance(messages, list) else []:
            call_id = getattr(message, "tool_call_id", None)
            if call_id:
                found.add(str(call_id))
    return found


async def caught_up() -> None:
    """Give the run's stream loop (``api.engine.execution``) the event-loop turns it takes to emit
    what
    a subgraph's step sent before its checkpoint, for that checkpoint's statement to take along.

    LangGraph hands a subgraph's chunks to the root's stream with ``call_soon_threadsafe``; the
    stream loop gets them a few turns later (the put, the queue's waiter task, ``asyncio.wait``'s
    callback, the run's task: three turns after the checkpoint's write starts, with langgraph
    1.2), while nothing orders that write after them. Without this wait a step's ``updates|<ns>``
    often went in a statement of their own after its checkpoint, and a kill in between lost them
    for good: the checkpointed step never runs again. A few spare turns cost nothing when idle."""
    for _ in range(SUBGRAPH_CHUNK_TURNS):
        await asyncio.sleep(0)
