"""Approval requests and decisions: what ``interrupt()`` carries and what resumes it.

The format is LangChain's human-in-the-loop one (``HumanInTheLoopMiddleware`` in
``langchain.agents.middleware.human_in_the_loop``), which LangChain's agent-chat-ui renders as
an Approve / Edit / Reject form. One interrupt asks about every asking call of an agent step, in
the order the model made them (agent-chat-ui walks them one by one and answers them all at once);
the answer holds one decision per action request, in the same order. Threadline adds
``tool_call_ids`` (what each decision binds to, the audit log names them) and ``policies`` (the
rule that asked about each call).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from pydantic import ValidationError

from agent.tools import ToolSpec
from agent.tools.base import describe_validation_error

DecisionType = Literal["approve", "edit", "reject"]
ALLOWED_DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject")


class Action(TypedDict):
    """A call: the tool's name and its arguments."""

    name: str
    args: dict[str, Any]


class ActionRequest(TypedDict):
    """The call asked about, and why it asks (human readable)."""

    name: str
    args: dict[str, Any]
    description: NotRequired[str]


class ReviewConfig(TypedDict):
    """How the call may be answered; ``args_schema`` is the JSON schema an edit must meet."""

    action_name: str
    allowed_decisions: list[DecisionType]
    args_schema: NotRequired[dict[str, Any]]


class HITLRequest(TypedDict):
    """LangChain's request for human review of a model's actions."""

    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]


class ApprovalRequest(HITLRequest):
    """The built-in agent's interrupt value: the step's asking calls, and threadline's extras."""

    tool_call_ids: list[str]
    policies: list[dict[str, str]]


class ApproveDecision(TypedDict):
    type: Literal["approve"]


class EditDecision(TypedDict):
    type: Literal["edit"]
    edited_action: Action
    """The same tool (an edit cannot switch tools) with its full, edited arguments."""


class RejectDecision(TypedDict):
    type: Literal["reject"]
    message: NotRequired[str]
    """Sent to the model with the refusal."""


Decision = ApproveDecision | EditDecision | RejectDecision


class HITLResponse(TypedDict):
    """The answer (resume value): one decision per action request, in their order."""

    decisions: list[Decision]


@dataclass(frozen=True)
class ApprovalDecision:
    """A human's answer to one approval request, as the ``tools`` node applies it."""

    decision: DecisionType
    args: dict[str, Any] | None = None
    message: str | None = None


@dataclass(frozen=True)
class AskedCall:
    """One call a request asks about: its tool, id, exact arguments and the rule that asked."""

    tool: ToolSpec
    call_id: str
    args: dict[str, Any]
    ruling: dict[str, str]


def _why(tool: ToolSpec, ruling: dict[str, str]) -> str:
    why = {
        "default": f"{tool.name} is not read-only",
        "deployment": "the deployment's approval policy asks for it",
        "task": "the task's approval policy asks for it",
        "run": "the run's approval policy asks for it",
    }.get(ruling.get("source", "default"), "the approval policy asks for it")
    return f"{why}: the approval policy says 'ask'"


def approval_request(calls: list[AskedCall]) -> ApprovalRequest:
    """The interrupt payload for a step's ``ask`` calls: the exact calls asked about, and the
    policy that asked (``agent.policy.Ruling``). An approval runs exactly these arguments."""
    return {
        "action_requests": [
            {"name": c.tool.name, "args": c.args, "description": _why(c.tool, c.ruling)}
            for c in calls
        ],
        "review_configs": [
            {
                "action_name": c.tool.name,
                "allowed_decisions": list(ALLOWED_DECISIONS),
                "args_schema": c.tool.args_schema.model_json_schema(),
            }
            for c in calls
        ],
        "tool_call_ids": [c.call_id for c in calls],
        "policies": [dict(c.ruling) for c in calls],
    }


def is_approval_request(value: Any) -> bool:
    """Whether an interrupt value is an approval request of the built-in agent."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("action_requests"), list)
        and bool(value["action_requests"])
        and isinstance(value.get("tool_call_ids"), list)
        and len(value["tool_call_ids"]) == len(value["action_requests"])
    )


def approval_calls(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """The tool name and arguments of each call an approval request asks about; ValueError for
    anything that is not one."""
    if not is_approval_request(value):
        raise ValueError("not an approval request (no action_requests and tool_call_ids)")
    out: list[tuple[str, dict[str, Any]]] = []
    for action in value["action_requests"]:
        if not isinstance(action, dict):
            raise ValueError("an approval request's action_requests are objects")
        args = action.get("args")
        out.append((str(action.get("name")), dict(args) if isinstance(args, dict) else {}))
    return out


def superseded_answer(count: int = 1) -> HITLResponse:
    """The answer recorded for a pending approval (of ``count`` calls) a new message closed."""
    reject: RejectDecision = {"type": "reject", "message": "superseded by a new message"}
    return {"decisions": [dict(reject) for _ in range(count)]}  # type: ignore[misc]


def answer_shape(names: list[str] | None = None) -> str:
    """What a valid answer looks like (for error messages)."""
    name = json.dumps(names[0]) if names and len(names) == 1 else '"<the asked tool>"'
    count = (
        "one decision"
        if not names or len(names) == 1
        else f"{len(names)} decisions, one per action request in their order"
    )
    return (
        f'{{"decisions": [{count}]}}, where a decision is {{"type": "approve"}}, '
        f'{{"type": "edit", "edited_action": {{"name": {name}, "args": {{...all arguments}}}}}} '
        'or {"type": "reject", "message"?: "..."}'
    )


_DECISION_KEYS: dict[str, set[str]] = {
    "approve": {"type"},
    "edit": {"type", "edited_action"},
    "reject": {"type", "message"},
}


def parse_decisions(
    answer: Any, tools: list[ToolSpec | None], names: list[str]
) -> list[ApprovalDecision]:
    """Validate a resume value for a request asking about calls of ``names`` (their tools, where
    known, to validate edits against); ValueError says what a valid answer looks like."""
    shape = answer_shape(names)
    if not isinstance(answer, dict):
        raise ValueError(f"an approval answer is an object: {shape}")
    if "decisions" not in answer:
        if "decision" in answer:
            raise ValueError(
                'the {"decision": ...} answer is no longer accepted; approvals use LangChain\'s '
                f"human-in-the-loop format: {shape}"
            )
        raise ValueError(f"an approval answer needs 'decisions': {shape}")
    extra = sorted(set(answer) - {"decisions"})
    if extra:
        raise ValueError(f"an approval answer has only 'decisions', not {extra}: {shape}")
    decisions = answer["decisions"]
    if not isinstance(decisions, list):
        raise ValueError(f"'decisions' must be a list: {shape}")
    if len(decisions) != len(names):
        asks = "one call" if len(names) == 1 else f"{len(names)} calls"
        raise ValueError(
            f"'decisions' must hold exactly {len(names)} (the request asks about {asks}), "
            f"not {len(decisions)}: {shape}"
        )
    out = []
    for index, (decision, tool, name) in enumerate(zip(decisions, tools, names, strict=True)):
        try:
            out.append(_parse_one(decision, tool, name, shape))
        except ValueError as err:
            if len(names) == 1:
                raise
            raise ValueError(f"decision {index + 1} ({name}): {err}") from None
    return out


def _parse_one(decision: Any, tool: ToolSpec | None, asked: str, shape: str) -> ApprovalDecision:
    if not isinstance(decision, dict):
        raise ValueError(f"a decision is an object: {shape}")
    word = decision.get("type")
    if word not in ALLOWED_DECISIONS:
        raise ValueError(
            f"a decision's 'type' must be 'approve', 'edit' or 'reject', not {word!r}: {shape}"
        )
    extra = sorted(set(decision) - _DECISION_KEYS[word])
    if extra:
        allowed = " and ".join(repr(k) for k in sorted(_DECISION_KEYS[word]))
        article = "an" if word in ("approve", "edit") else "a"
        raise ValueError(f"{article} {word!r} decision has only {allowed}, not {extra}: {shape}")
    if word == "approve":
        return ApprovalDecision(decision="approve")
    if word == "reject":
        message = decision.get("message")
        if message is not None and not isinstance(message, str):
            raise ValueError(f"a 'reject' decision's message must be a string: {shape}")
        return ApprovalDecision(decision="reject", message=message)
    action = decision.get("edited_action")
    if (
        not isinstance(action, dict)
        or not isinstance(action.get("name"), str)
        or not isinstance(action.get("args"), dict)
        or set(action) - {"name", "args"}
    ):
        raise ValueError(
            "an 'edit' decision needs 'edited_action': {\"name\": the asked tool, \"args\": "
            f"the tool's full, edited arguments}}: {shape}"
        )
    if action["name"] != asked:
        raise ValueError(
            f"an edit cannot switch tools: edited_action.name must be {asked!r}, not "
            f"{action['name']!r}. Reject the call instead if another tool should run: {shape}"
        )
    args: dict[str, Any] = _unquoted(action["args"], tool)
    if tool is not None:
        try:
            args = tool.validate_args(args).model_dump(exclude_unset=True)
        except ValidationError as err:
            raise ValueError(describe_validation_error(tool, err)) from None
    return ApprovalDecision(decision="edit", args=args)


def _unquoted(args: dict[str, Any], tool: ToolSpec | None) -> dict[str, Any]:
    """Edited arguments whose list or object values came as JSON text (agent-chat-ui's form
    edits every field as text) parsed back where the tool's schema wants a list or object."""
    if tool is None:
        return args
    fields = tool.args_schema.model_json_schema().get("properties", {})
    out = dict(args)
    for key, value in args.items():
        kinds = _json_types(fields.get(key) or {})
        if isinstance(value, str) and kinds & {"array", "object"} and "string" not in kinds:
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                continue  # left as it is: the schema says why it is wrong
            if isinstance(parsed, list | dict):
                out[key] = parsed
    return out


def _json_types(schema: dict[str, Any]) -> set[str]:
    kinds = {schema["type"]} if isinstance(schema.get("type"), str) else set()
    for option in schema.get("anyOf") or []:
        if isinstance(option, dict):
            kinds |= _json_types(option)
    return kinds
