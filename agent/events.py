"""The agent's progress events: what its nodes send on LangGraph's ``custom`` stream mode.

Declared once, each keyed on its ``type`` as LangGraph's own stream parts are: the nodes build
them, and the server's adapter (``api.builtin_agent``), the CLI and the page read them. Every
event is a JSON object; fields beyond these are not sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from langgraph.config import get_stream_writer


class StepEvent(TypedDict):
    """The agent node starts a model call."""

    type: Literal["step"]
    node: Literal["agent"]
    step: int


class CallSummary(TypedDict):
    name: str
    id: str


class StepFinishedEvent(TypedDict):
    """The model answered: the calls it made and the tokens it used."""

    type: Literal["step_finished"]
    node: Literal["agent"]
    step: int
    tool_calls: list[CallSummary]
    tokens: int


class BudgetEvent(TypedDict):
    """What is left of the run's budget; ``exceeded`` names the one spent."""

    type: Literal["budget"]
    left: dict[str, float]
    exceeded: NotRequired[str]


class ToolStartedEvent(TypedDict):
    type: Literal["tool_started"]
    tool_call_id: str
    tool: str
    args: dict[str, Any]


class ToolFinishedEvent(TypedDict):
    """A call's outcome; ``replayed``: it returned its recorded result instead of running again
    (it had executed before the process died, but its result was not checkpointed)."""

    type: Literal["tool_finished"]
    tool_call_id: str
    tool: str
    ok: bool
    duration: float
    output: str
    """The result's first 2,000 characters."""
    replayed: NotRequired[bool]


class VerifyEvent(TypedDict):
    """The acceptance check's verdict and the status it leads to (``passed`` None: no check)."""

    type: Literal["verify"]
    passed: bool | None
    status: str
    detail: NotRequired[str]
    attempt: NotRequired[int]
    exit_code: NotRequired[int | None]
    output: NotRequired[str]


class CallsSupersededEvent(TypedDict):
    """A new message closed calls still waiting for approval: they never run."""

    type: Literal["calls_superseded"]
    tool_call_ids: list[str]


class ContextCompactedEvent(TypedDict):
    """Older turns were replaced by one summary message to keep the model's input under its
    context budget (``agent.context``); the summary is in the thread's messages too."""

    type: Literal["context_compacted"]
    removed_messages: int
    tokens_before: int
    """Estimated tokens of the call before (system prompt, messages, tool schemas)."""
    tokens_after: int
    budget: int
    summary: str


AgentEvent = (
    StepEvent
    | StepFinishedEvent
    | BudgetEvent
    | ToolStartedEvent
    | ToolFinishedEvent
    | VerifyEvent
    | CallsSupersededEvent
    | ContextCompactedEvent
)
"""Any of the agent's progress events; tell them apart by ``type``."""


def event_writer() -> Callable[[AgentEvent], None]:
    """The running node's writer of progress events (LangGraph's ``custom`` stream mode),
    typed so every event a node sends is one declared here."""
    return get_stream_writer()


class ToolExecution(TypedDict):
    """What the record hook (``agent.hooks.RECORD_TOOL_KEY``) gets for each execution: the
    finished event plus the arguments run and the whole (capped) result."""

    tool_call_id: str
    tool: str
    ok: bool
    duration: float
    output: str
    args: dict[str, Any]
    result: str
    requested_by: NotRequired[str]
    """For a direct call (``{"call": ...}`` input), the identity of the run that asked for it."""


class PriorResult(TypedDict):
    """What the prior-result hook (``agent.hooks.PRIOR_RESULT_KEY``) returns for a call that
    already executed."""

    ok: bool
    content: str
    duration: float
