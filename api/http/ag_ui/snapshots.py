"""A thread's values as AG-UI sees them: the state (``STATE_SNAPSHOT``, ``STATE_DELTA``) and the
conversation (``MESSAGES_SNAPSHOT``).

- The state is the graph's values without ``messages`` and ``__interrupt__``: the conversation
  travels as messages (text and tool-call events, ``MESSAGES_SNAPSHOT``), the interrupts in
  ``RUN_FINISHED``'s outcome, not inside the state (as ag-ui-langgraph does). Successive states
  differ by an RFC 6902 JSON Patch (``jsonpatch.make_patch``).
- Messages are LangChain's serialized ones (``type`` human, ai, tool, system) mapped to AG-UI's
  roles: user, assistant (text content, ``toolCalls`` with JSON arguments), tool, system. Other
  kinds (function, remove markers) are left out.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import orjson
from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from api.http.ag_ui.chat import text_of

HIDDEN = ("messages", "__interrupt__")
"""Not state: the conversation, and the pending interrupts (``RUN_FINISHED``'s outcome has them)."""


def state_view(values: Any) -> Any:
    """The AG-UI state of a ``values`` chunk: the values without :data:`HIDDEN` keys."""
    if isinstance(values, dict):
        return {k: v for k, v in values.items() if k not in HIDDEN}
    return values


def patch(before: Any, after: Any) -> list[dict[str, Any]]:
    """RFC 6902 operations turning ``before`` into ``after`` (empty when they are equal)."""
    operations: list[dict[str, Any]] = jsonpatch.make_patch(before, after).patch
    return operations


def ag_ui_messages(messages: Any) -> list[Message]:
    """LangChain message dicts (a thread's ``values["messages"]``) as AG-UI messages."""
    out: list[Message] = []
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict):
            continue
        converted = _message(message, str(message.get("id") or f"message-{index}"))
        if converted is not None:
            out.append(converted)
    return out


def _message(message: dict[str, Any], message_id: str) -> Message | None:
    kind = message.get("type")
    text = text_of(message.get("content"))
    if kind in ("human", "HumanMessageChunk"):
        return UserMessage(id=message_id, content=text)
    if kind in ("system", "SystemMessageChunk"):
        return SystemMessage(id=message_id, content=text)
    if kind in ("tool", "ToolMessageChunk"):
        return ToolMessage(
            id=message_id,
            content=text,
            tool_call_id=str(message.get("tool_call_id") or ""),
            error=text if message.get("status") == "error" else None,
        )
    if kind in ("ai", "AIMessageChunk"):
        calls = [
            ToolCall(
                id=str(call.get("id") or ""),
                function=FunctionCall(
                    name=str(call.get("name") or ""),
                    arguments=orjson.dumps(call.get("args") or {}).decode(),
                ),
            )
            for call in message.get("tool_calls") or []
            if isinstance(call, dict)
        ]
        return AssistantMessage(id=message_id, content=text or None, tool_calls=calls or None)
    return None
