"""The agent's state: what every checkpoint holds."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage, ToolCall
from langgraph.channels import DeltaChannel

from agent.message_batches import add_messages_batch

Status = Literal["running", "agent_done", "stuck", "budget_exceeded", "verified", "failed"]


class TaskSpec(TypedDict, total=False):
    """A task: catalog name and parameters; the agent fills in the rest on its first step."""

    name: str
    """A catalog task (``counter``, ``fix_test``, ...) or ``freeform``."""
    params: dict[str, Any]
    instruction: str
    """Set once the task is materialized (template copied, instruction rendered)."""
    check: list[str] | None
    """Acceptance check: a program and its arguments run in the workspace; ``None``: no check."""
    policy: dict[str, str]
    """The task's own approval rules (below the deployment's and the run's)."""


class Usage(TypedDict):
    """Budget spent so far."""

    steps: int
    tokens: int
    seconds: float


class Verdict(TypedDict):
    """The outcome of the last acceptance check."""

    passed: bool
    exit_code: int | None
    output: str


class DirectCall(TypedDict, total=False):
    """One tool call to run on the thread without the model (``{"call": ...}`` input, what the
    thread's MCP endpoint sends for a call the policy asks about): decided by the same policy,
    asked through the same approvals, audited and run exactly once like the agent's calls."""

    name: str
    args: dict[str, Any]
    id: str
    """The call's id (its idempotency key is ``{thread_id}:{id}``); default: derived from the
    conversation's length."""


class AgentState(TypedDict, total=False):
    """State of the built-in agent."""

    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch)]
    """Stored as deltas: each checkpoint saves the new messages, not the whole list again, so a
    thread's storage grows linearly with its length (measured in bench/: 100 steps take 9.5x the
    bytes of their messages instead of 26x, and the growth is no longer quadratic)."""
    task: TaskSpec | None
    step: int
    """Agent steps taken (model calls)."""
    status: Status
    usage: Usage
    """Spent on the current task; written only by ``agent`` and ``verify`` (never in parallel)."""
    verify_attempts: int
    verdict: Verdict | None
    call: DirectCall | None
    """A direct call waiting to be made (the ``direct`` node turns it into a tool call)."""


class ToolTask(TypedDict, total=False):
    """The payload of one ``Send`` to the tools node: exactly one tool call, and its rule.

    The payload is part of the checkpoint, so the rule decided when the call was made is the rule
    it runs under on every later attempt (``agent.policy``).
    """

    tool_call: ToolCall
    ruling: dict[str, str]
    """``agent.policy.Ruling.as_dict()``: the rule (auto, ask, deny), its source, the server's."""
    refusal: str
    """Set when the call must not run at all (the run's policy was malformed): the model's note."""
    decision: dict[str, Any]
    """An ``ask`` call's answer, from the ``review`` node that asked (``ApprovalDecision`` as a
    dict): it runs as approved or edited, or not at all."""
    answer_error: str
    """Why the review's answer was unusable (it bypassed the server's checks): not run."""
    requested_by: str
    """A direct call's: the identity of the run that asked for it (the server's
    ``langgraph_auth_user_id``, else ``anonymous``), whom the audit log names for it."""
    position: int
    """The call's index among the tool calls of the model's message."""
    after: list[str]
    """Only on a call that writes (its tool is not read-only, or unknown): the ids of the step's
    earlier calls that write, which finish before it starts (``agent.concurrency``). A payload
    without ``position`` and ``after`` (checkpointed before they existed) runs at once."""


class ReviewTask(TypedDict):
    """The payload of the ``Send`` to the review node: a step's calls that ask for approval."""

    calls: list[ToolTask]
