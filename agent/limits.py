"""Guards that stop a task: steps, tokens, seconds, and the same call repeated."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from agent.state import AgentState, Usage


@dataclass(frozen=True)
class Limits:
    """Budgets of one task (a thread's input), and the checks' bounds."""

    max_steps: int = 20
    """Agent steps (model calls) per task."""
    max_tokens: int = 200_000
    """Tokens per task, as the model reports them in its usage metadata."""
    max_seconds: float = 600.0
    """Seconds spent in nodes per task: model calls plus tool calls (each parallel call counts)."""
    stuck_repeats: int = 3
    """This many consecutive agent steps making the very same calls mean the agent is stuck."""
    max_verify_attempts: int = 2
    """Acceptance checks per task; a failure before the last one goes back to the agent."""
    check_timeout: float = 120.0
    tool_output_cap: int = 16_000
    tool_concurrency: int = 4
    """Read-only tool calls of one step running at once per thread (``agent.concurrency``);
    calls that write always run one at a time, in the order the model gave them."""
    context_budget: int | None = None
    """Tokens one model call may send (system prompt, messages, tool schemas); ``None``: the
    model's known window minus room for its reply (``agent.context.default_budget``)."""

    def recursion_limit(self) -> int:
        """A LangGraph ``recursion_limit`` that the other guards always reach first."""
        # Each agent step takes at most two supersteps (agent, tools); verify loops add two more.
        return (
            2 * self.max_steps * (self.max_verify_attempts + 1) + 4 * self.max_verify_attempts + 8
        )


def _signature(msg: AIMessage) -> list[tuple[str, str]]:
    return sorted((tc["name"], json.dumps(tc["args"], sort_keys=True)) for tc in msg.tool_calls)


def is_stuck(messages: Sequence[BaseMessage], repeats: int) -> bool:
    """The last ``repeats`` agent replies (with no human turn between) made identical calls."""
    seen: list[AIMessage] = []
    for msg in reversed(messages):
        if isinstance(msg, HumanMessage):
            break
        if isinstance(msg, AIMessage):
            if not msg.tool_calls:
                break
            seen.append(msg)
            if len(seen) == repeats:
                break
    return len(seen) == repeats and all(_signature(m) == _signature(seen[0]) for m in seen)


def guard_reason(state: AgentState, limits: Limits) -> str | None:
    """``stuck`` or ``budget_exceeded`` when a guard stops the task, else ``None``.

    Reads only what ``agent`` wrote, never a tool task's result, so every parallel tool task
    routes the same way.
    """
    if is_stuck(state.get("messages", []), limits.stuck_repeats):
        return "stuck"
    usage = state.get("usage") or {"steps": 0, "tokens": 0, "seconds": 0.0}
    if (
        usage["steps"] >= limits.max_steps
        or usage["tokens"] >= limits.max_tokens
        or usage["seconds"] >= limits.max_seconds
    ):
        return "budget_exceeded"
    return None


def budget_left(usage: Usage, limits: Limits) -> dict[str, float]:
    """What remains of each budget, for progress events."""
    return {
        "steps": limits.max_steps - usage["steps"],
        "tokens": limits.max_tokens - usage["tokens"],
        "seconds": round(limits.max_seconds - usage["seconds"], 3),
    }
