"""LangGraph ``messages`` chunks as AG-UI's text and tool-call events (:class:`ChatStream`).

A stored ``messages`` event is ``[message, metadata]``: an AI message chunk as the model streams
it, or a whole message a node returned (LangGraph sends those once, by id). What they become:

- an AI chunk's text: ``TEXT_MESSAGE_START`` (its id, role ``assistant``) the first time, then
  ``TEXT_MESSAGE_CONTENT`` per non-empty delta; its ``tool_call_chunks``: ``TOOL_CALL_START``
  (the call's id and name, ``parentMessageId`` the message) when a call's first chunk comes,
  ``TOOL_CALL_ARGS`` per argument fragment (later chunks name the call by ``index`` only);
- the chunk marked ``chunk_position: "last"``, a chunk of another message, or the node's step
  finishing: ``TEXT_MESSAGE_END`` and ``TOOL_CALL_END`` for what is open;
- a whole AI message not streamed before: the same events at once (arguments as one JSON text);
- a tool message: ``TOOL_CALL_RESULT`` (closing its call first if it is still open);
- human and system messages: nothing (they are the input; ``MESSAGES_SNAPSHOT`` has them).

Rules it keeps: an id is started once and ended once; nothing is left open when
:meth:`ChatStream.close` returns (``RUN_FINISHED`` may follow). It never raises on odd data.
"""

from __future__ import annotations

from typing import Any

import orjson
from ag_ui.core import (
    BaseEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

AI_TYPES = ("AIMessageChunk", "ai")
TOOL_TYPES = ("ToolMessageChunk", "tool")


def text_of(content: Any) -> str:
    """The text of a LangChain message's content: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
    return "".join(parts)


class ChatStream:
    """The open text message and tool calls of a run's stream, and what was sent already."""

    def __init__(self) -> None:
        self.text_open: str | None = None
        self.calls_open: dict[str, str] = {}
        """Open tool call id → the AI message id it belongs to."""
        self.call_by_index: dict[tuple[str, int], str] = {}
        self.done_messages: set[str] = set()
        self.done_calls: set[str] = set()
        self.done_results: set[str] = set()

    def feed(self, message: dict[str, Any]) -> list[BaseEvent]:
        kind = message.get("type")
        if kind == "AIMessageChunk":
            return self._chunk(message)
        if kind == "ai":
            return self._whole(message)
        if kind in TOOL_TYPES:
            return self._result(message)
        return []

    def close(self) -> list[BaseEvent]:
        """End whatever is open (a message, its tool calls)."""
        out: list[BaseEvent] = []
        if self.text_open is not None:
            out.append(TextMessageEndEvent(message_id=self.text_open))
            self.done_messages.add(self.text_open)
            self.text_open = None
        for call_id in list(self.calls_open):
            out += self._end_call(call_id)
        return out

    def _chunk(self, message: dict[str, Any]) -> list[BaseEvent]:
        message_id = str(message.get("id") or "")
        if not message_id or message_id in self.done_messages:
            return []
        out: list[BaseEvent] = []
        if self.text_open not in (None, message_id) or any(
            owner != message_id for owner in self.calls_open.values()
        ):
            out += self.close()  # another message began: the previous one is complete
        text = text_of(message.get("content"))
        if text:
            if self.text_open is None:
                out.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
                self.text_open = message_id
            out.append(TextMessageContentEvent(message_id=message_id, delta=text))
        for chunk in message.get("tool_call_chunks") or []:
            if isinstance(chunk, dict):
                out += self._call_chunk(message_id, chunk)
        if message.get("chunk_position") == "last":
            out += self.close()
            self.done_messages.add(message_id)
        return out

    def _call_chunk(self, message_id: str, chunk: dict[str, Any]) -> list[BaseEvent]:
        index = chunk.get("index")
        key = (message_id, index if isinstance(index, int) else -1)
        call_id = chunk.get("id") or self.call_by_index.get(key)
        if not call_id:
            return []
        out: list[BaseEvent] = []
        if call_id not in self.calls_open:
            if call_id in self.done_calls or not chunk.get("name"):
                return []
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=str(chunk["name"]),
                    parent_message_id=message_id,
                )
            )
            self.calls_open[call_id] = message_id
            self.call_by_index[key] = call_id
        args = chunk.get("args")
        if isinstance(args, str) and args:
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=args))
        return out

    def _whole(self, message: dict[str, Any]) -> list[BaseEvent]:
        message_id = str(message.get("id") or "")
        if not message_id or message_id in self.done_messages:
            return []
        out = self.close()
        if message_id in self.done_messages:  # it was the streamed one, now closed
            return out
        text = text_of(message.get("content"))
        if text:
            out += [
                TextMessageStartEvent(message_id=message_id, role="assistant"),
                TextMessageContentEvent(message_id=message_id, delta=text),
                TextMessageEndEvent(message_id=message_id),
            ]
        for call in message.get("tool_calls") or []:
            call_id = call.get("id") if isinstance(call, dict) else None
            if not call_id or call_id in self.done_calls:
                continue
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=str(call.get("name") or ""),
                    parent_message_id=message_id,
                )
            )
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=_args(call.get("args"))))
            out.append(ToolCallEndEvent(tool_call_id=call_id))
            self.done_calls.add(call_id)
        self.done_messages.add(message_id)
        return out

    def _result(self, message: dict[str, Any]) -> list[BaseEvent]:
        message_id = str(message.get("id") or "")
        call_id = message.get("tool_call_id")
        if not message_id or not call_id or message_id in self.done_results:
            return []
        out = self._end_call(call_id) if call_id in self.calls_open else []
        out.append(
            ToolCallResultEvent(
                message_id=message_id,
                tool_call_id=str(call_id),
                content=text_of(message.get("content")),
                role="tool",
            )
        )
        self.done_results.add(message_id)
        return out

    def _end_call(self, call_id: str) -> list[BaseEvent]:
        self.calls_open.pop(call_id, None)
        self.done_calls.add(call_id)
        return [ToolCallEndEvent(tool_call_id=call_id)]


def _args(args: Any) -> str:
    return orjson.dumps(args if args is not None else {}).decode()
