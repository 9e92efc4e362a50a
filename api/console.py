"""Readable terminal lines for stream chunks (``updates`` and ``custom`` modes)."""

from __future__ import annotations

import json
from typing import Any


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_custom(data: Any) -> str | None:
    """One line for a progress event, or None for events not worth a line."""
    if not isinstance(data, dict):
        return f"  · {_short(data)}"
    kind = data.get("type")
    if kind == "step":
        return f"[agent] step {data.get('step')}"
    if kind == "tool_started":
        return f"  → {data.get('tool')} {_short(data.get('args'))}"
    if kind == "tool_finished":
        mark = "ok" if data.get("ok") else "error"
        took = f"{data.get('duration', 0):.2f}s"
        return f"  ← {data.get('tool')} {mark} in {took}: {_short(data.get('output', ''), 80)}"
    if kind == "verify":
        passed = data.get("passed")
        head = "no check" if passed is None else ("passed" if passed else "failed")
        return (
            f"[verify] {head} → {data.get('status')} {_short(data.get('output', ''), 80)}".rstrip()
        )
    if kind == "budget" and data.get("exceeded"):
        return f"[budget] {data['exceeded']} budget spent"
    return None


def render_update(data: Any) -> list[str]:
    """Lines for an ``updates`` chunk: the model's words and interrupts."""
    lines: list[str] = []
    if not isinstance(data, dict):
        return lines
    for node, update in data.items():
        if node == "__interrupt__":
            for item in update or []:
                value = (
                    item.get("value") if isinstance(item, dict) else getattr(item, "value", item)
                )
                lines.append(f"[approval needed] {_short(value, 200)}")
        elif node == "agent" and isinstance(update, dict):
            for msg in update.get("messages") or []:
                content = getattr(msg, "content", None) or (
                    msg.get("content") if isinstance(msg, dict) else None
                )
                if (
                    content
                    and getattr(msg, "type", msg.get("type") if isinstance(msg, dict) else "")
                    == "ai"
                ):
                    calls = getattr(msg, "tool_calls", None) or (
                        msg.get("tool_calls") if isinstance(msg, dict) else None
                    )
                    # A final answer is what the user asked for: print it whole, not cut.
                    whole = isinstance(content, str) and not calls
                    lines.append(f"  agent: {content.strip() if whole else _short(content, 200)}")
    return lines
