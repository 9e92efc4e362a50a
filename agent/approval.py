"""Approval requests and decisions: what ``interrupt()`` carries and what resumes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from agent.tools import ToolSpec
from agent.tools.base import describe_validation_error

DecisionWord = Literal["approve", "edit", "reject"]


@dataclass(frozen=True)
class ApprovalDecision:
    """A human's answer to one approval request."""

    decision: DecisionWord
    args: dict[str, Any] | None = None
    message: str | None = None


def approval_request(
    tool: ToolSpec, call_id: str, args: dict[str, Any], ruling: dict[str, str] | None = None
) -> dict[str, Any]:
    """The interrupt payload of an ``ask`` call: the exact call asked about, and the policy that
    asked (``agent.policy.Ruling``). An approval runs exactly these arguments."""
    source = (ruling or {}).get("source", "default")
    why = {
        "default": f"{tool.name} is not read-only",
        "deployment": "the deployment's approval policy asks for it",
        "task": "the task's approval policy asks for it",
        "run": "the run's approval policy asks for it",
    }.get(source, "the approval policy asks for it")
    return {
        "type": "approval",
        "tool_call_id": call_id,
        "tool": tool.name,
        "args": args,
        "reason": f"{why}: the approval policy says 'ask'",
        "policy": dict(ruling or {"rule": "ask", "source": "default", "server_rule": "ask"}),
    }


def parse_decision(answer: Any, tool: ToolSpec | None = None) -> ApprovalDecision:
    """Validate a resume value; ValueError says what a valid decision looks like.

    With ``tool``, edited arguments are validated against its schema.
    """
    if not isinstance(answer, dict):
        raise ValueError(
            'a decision is an object: {"decision": "approve" | "edit" | "reject", '
            '"args"?: {...}, "message"?: "..."}'
        )
    word = answer.get("decision")
    if word not in ("approve", "edit", "reject"):
        raise ValueError(f"decision must be 'approve', 'edit' or 'reject', not {word!r}")
    message = answer.get("message")
    if message is not None and not isinstance(message, str):
        raise ValueError("message must be a string")
    args = answer.get("args")
    if word == "edit":
        if not isinstance(args, dict):
            raise ValueError("an 'edit' decision needs 'args': the tool's full, edited arguments")
        if tool is not None:
            try:
                args = tool.validate_args(args).model_dump(exclude_unset=True)
            except ValidationError as err:
                raise ValueError(describe_validation_error(tool, err)) from None
    return ApprovalDecision(decision=word, args=args if word == "edit" else None, message=message)
