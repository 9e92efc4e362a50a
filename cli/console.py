"""Readable terminal lines for stream chunks (``updates``, ``custom`` and ``messages-tuple``
modes), as the SSE stream carries them (JSON objects)."""

from __future__ import annotations

import json
from collections.abc import Container
from typing import Any, cast

from agent.approval import approval_calls, is_approval_request
from agent.events import BudgetEvent, StepEvent, ToolFinishedEvent, ToolStartedEvent, VerifyEvent


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_custom(data: Any) -> str | None:
    """One line for one of the agent's progress events (``agent.events``), or None for events
    not worth a line."""
    if not isinstance(data, dict):
        return f"  · {_short(data)}"
    kind = data.get("type")
    if kind == "step":
        step = cast(StepEvent, data)
        return f"[agent] step {step['step']}"
    if kind == "tool_started":
        started = cast(ToolStartedEvent, data)
        return f"  → {started['tool']} {_short(started['args'])}"
    if kind == "tool_finished":
        done = cast(ToolFinishedEvent, data)
        mark = "ok" if done["ok"] else "error"
        took = f"{done['duration']:.2f}s"
        return f"  ← {done['tool']} {mark} in {took}: {_short(done['output'], 80)}"
    if kind == "verify":
        verify = cast(VerifyEvent, data)
        passed = verify["passed"]
        head = "no check" if passed is None else ("passed" if passed else "failed")
        output = _short(verify.get("output", ""), 80)
        return f"[verify] {head} → {verify['status']} {output}".rstrip()
    if kind == "budget":
        budget = cast(BudgetEvent, data)
        if "exceeded" in budget:
            return f"[budget] {budget['exceeded']} budget spent"
    return None


class TextStream:
    """The agent's text as the model writes it (``messages-tuple`` chunks): one ``  agent: ``
    line per AI message, written piece by piece. ``streamed`` holds the ids of the messages
    written this way, whose final message (in ``updates``) is then not printed again."""

    def __init__(self) -> None:
        self.streamed: set[str] = set()
        self.open: str | None = None
        """The message whose line is unfinished (no newline yet)."""

    def chunk(self, data: Any) -> str:
        """What to write for one ``messages`` event: its text, after a line head for a new
        message. Tool-call and usage chunks, whole messages and other kinds write nothing."""
        message = data[0] if isinstance(data, list) and data else None
        if not isinstance(message, dict) or message.get("type") != "AIMessageChunk":
            return ""
        message_id, text = message.get("id"), _text(message.get("content"))
        if not isinstance(message_id, str) or not text:
            return ""
        if self.open == message_id:
            return text
        text = text.lstrip()
        if not text:  # leading whitespace: the line starts with the first word
            return ""
        head = self.close() + "  agent: "
        self.open = message_id
        self.streamed.add(message_id)
        return head + text

    def close(self) -> str:
        """The newline that ends an unfinished streamed line (before any other output)."""
        if self.open is None:
            return ""
        self.open = None
        return "\n"


def _text(content: Any) -> str:
    """A chunk's text: string content, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) and part.get("type") == "text" else ""
            for part in content
        )
    return ""


def render_update(data: Any, streamed: Container[str] = ()) -> list[str]:
    """Lines for an ``updates`` chunk: the model's words and interrupts. Messages whose ids are
    in ``streamed`` were printed as they streamed and are left out."""
    lines: list[str] = []
    if not isinstance(data, dict):
        return lines
    for node, update in data.items():
        if node == "__interrupt__":
            for item in update or []:
                value = item.get("value") if isinstance(item, dict) else item
                if is_approval_request(value):
                    for name, args in approval_calls(value):
                        lines.append(f"[approval needed] {name} {_short(args, 200)}")
                else:
                    lines.append(f"[interrupt] {_short(value, 200)}")
        elif node == "agent" and isinstance(update, dict):
            for msg in update.get("messages") or []:
                if not isinstance(msg, dict) or msg.get("id") in streamed:
                    continue
                content = msg.get("content")
                if content and msg.get("type") == "ai":
                    calls = msg.get("tool_calls")
                    # A final answer is what the user asked for: print it whole, not cut.
                    whole = isinstance(content, str) and not calls
                    lines.append(f"  agent: {content.strip() if whole else _short(content, 200)}")
    return lines
