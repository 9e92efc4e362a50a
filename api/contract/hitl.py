"""LangChain's human-in-the-loop request and answer, as plain data: the interrupt value of
``HumanInTheLoopMiddleware`` (and of the built-in agent), ``{"action_requests": [{"name",
"args", "description"}, ...], "review_configs": [...]}``, answered with ``{"decisions":
[...]}``, one decision per action request, in their order.

Every protocol door (A2A, AG-UI, MCP) shows such a request in its own shape and turns its
protocol's answer into one of these; anything else pending is a plain interrupt whose answer is
the client's resume value as it is.
"""

from __future__ import annotations

from typing import Any


def is_request(value: Any) -> bool:
    """Whether an interrupt value asks for approval of tool calls."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("action_requests"), list)
        and bool(value["action_requests"])
    )


def actions(value: Any) -> list[dict[str, Any]]:
    """The action requests of an approval request (objects only); ``[]`` for anything else."""
    if not is_request(value):
        return []
    return [a for a in value["action_requests"] if isinstance(a, dict)]


def calls(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """The tool name and arguments of each call an approval request asks about."""
    out: list[tuple[str, dict[str, Any]]] = []
    for action in actions(value):
        args = action.get("args")
        out.append((str(action.get("name")), dict(args) if isinstance(args, dict) else {}))
    return out


def count(value: Any) -> int:
    """How many decisions an answer to ``value`` holds (one for anything but a request)."""
    return max(1, len(value["action_requests"])) if is_request(value) else 1


def approve_all(value: Any) -> dict[str, Any]:
    """The answer that approves every call ``value`` asks about."""
    return {"decisions": [{"type": "approve"} for _ in range(count(value))]}


def reject_all(value: Any, message: str) -> dict[str, Any]:
    """The answer that rejects every call ``value`` asks about, telling the model why."""
    return {"decisions": [{"type": "reject", "message": message} for _ in range(count(value))]}
