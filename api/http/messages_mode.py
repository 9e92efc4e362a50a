"""Stream modes derived at the SSE edge from the stored ``messages`` tuples.

A run stores LangGraph's ``messages`` chunks as they come, ``[message, metadata]``. What a
client receives depends on the mode it asked for, as on LangGraph Server:

- ``messages-tuple``: the tuple itself, as a ``messages`` event;
- ``messages``: ``messages/metadata`` (``{id: {"metadata": ...}}``) the first time a message id
  appears, then ``messages/partial`` (a chunk) or ``messages/complete`` (a whole message) with
  ``[the message so far]``: the chunks of one id accumulated, as LangGraph Server does;
- ``events``: a subset of LangChain's ``astream_events`` v2, enough for CopilotKit's LangGraph
  path: ``on_chat_model_stream`` per chunk (``data.chunk``) and ``on_chat_model_end`` per whole
  AI message (``data.output``), with the node's ``metadata``, ``name`` and ``tags``. Other
  astream_events (chains, tools, retrievers) are not produced.

Everything is computed from the stored events, so a replay (from the start or from a
``Last-Event-ID``: the stream first reads the run's earlier tuples to rebuild the accumulated
messages) sends exactly what a live reader got. Derived events carry the id of the stored
event they come from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from langchain_core.messages import (
    BaseMessage,
    BaseMessageChunk,
    message_chunk_to_message,
    messages_from_dict,
)

from api.platform.serde import to_jsonable

Derived = list[tuple[str, str]]
"""(event name, JSON data) pairs to send for one stored event."""


def derives(modes: Iterable[str]) -> bool:
    """Whether the stored ``messages`` events need translating for these modes."""
    wanted = set(modes)
    return "events" in wanted or ("messages" in wanted and "messages-tuple" not in wanted)


class MessagesTranslator:
    def __init__(self, modes: Iterable[str]) -> None:
        wanted = set(modes)
        self.tuples = "messages-tuple" in wanted
        self.partials = "messages" in wanted and not self.tuples
        self.events = "events" in wanted
        self.seen: dict[str, BaseMessage] = {}

    def feed(self, data: str) -> Derived:
        """The events to send for one stored ``messages`` event (its JSON ``data``)."""
        out: Derived = [("messages", data)] if self.tuples else []
        parsed = _parse(data)
        if parsed is None:
            return out
        message, metadata = parsed
        if self.partials:
            out += self._partial(message, metadata)
        if self.events:
            out += _events(message, metadata)
        return out

    def replay(self, data: str) -> None:
        """Account for an event sent before the reader's ``Last-Event-ID``."""
        if self.partials and (parsed := _parse(data)) is not None:
            self._partial(*parsed)

    def _partial(self, message: BaseMessage, metadata: dict[str, Any]) -> Derived:
        out: Derived = []
        key = message.id or ""
        previous = self.seen.get(key) if key else None
        if isinstance(previous, BaseMessageChunk) and isinstance(message, BaseMessageChunk):
            merged: BaseMessage = previous + message
        else:
            merged = message
            out.append(("messages/metadata", _json({key: {"metadata": metadata}})))
        if key:
            self.seen[key] = merged
        name = "messages/partial" if isinstance(message, BaseMessageChunk) else "messages/complete"
        whole = message_chunk_to_message(merged) if isinstance(merged, BaseMessageChunk) else merged
        out.append((name, _json([whole])))
        return out


def _events(message: BaseMessage, metadata: dict[str, Any]) -> Derived:
    common = {
        "name": metadata.get("langgraph_node", ""),
        "tags": metadata.get("tags") or [],
        "metadata": metadata,
        "run_id": metadata.get("run_id", ""),
        "parent_ids": [],
    }
    if isinstance(message, BaseMessageChunk):
        return [
            (
                "events",
                _json({"event": "on_chat_model_stream", "data": {"chunk": message}, **common}),
            )
        ]
    if message.type == "ai":
        return [
            ("events", _json({"event": "on_chat_model_end", "data": {"output": message}, **common}))
        ]
    return []


def _parse(data: str) -> tuple[BaseMessage, dict[str, Any]] | None:
    """A stored tuple back as a message; None for anything else (never raises)."""
    try:
        value = orjson.loads(data)
        raw, metadata = value
        kind = raw.get("type")
        message = messages_from_dict([{"type": kind, "data": raw}])[0]
    except Exception:  # not a (message, metadata) pair of a kind LangChain knows
        return None
    return message, metadata if isinstance(metadata, dict) else {}


def _json(value: Any) -> str:
    return orjson.dumps(to_jsonable(value)).decode()
