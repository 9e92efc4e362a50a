"""The ``agent`` node: starts a task when new input arrives, then asks the model what to do."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_stream_writer

from agent.limits import Limits, budget_left
from agent.state import AgentState, TaskSpec, Usage
from agent.tasks import get_task
from agent.tools import ToolSpec, ensure_workspace

SYSTEM_PROMPT = (
    "You are an agent working in a workspace directory through tools: {tools}. Paths are relative "
    "to the workspace root. Make parallel tool calls when they are independent. When the task is "
    "done, answer without tool calls; an acceptance check then runs and reports back if it fails."
)
VERIFY_FEEDBACK_NAME = "verify"
"""``name`` of the human message ``verify`` adds, to tell feedback from new input."""


def thread_id_of(config: RunnableConfig) -> str:
    """The thread the run belongs to."""
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if not thread_id:
        raise ValueError("the graph needs config.configurable.thread_id")
    return str(thread_id)


def zero_usage() -> Usage:
    return {"steps": 0, "tokens": 0, "seconds": 0.0}


@dataclass
class AgentStep:
    """Callable node; holds the bound model and the collaborators."""

    model: BaseChatModel
    tools: list[ToolSpec]
    data_dir: Path
    limits: Limits

    def __post_init__(self) -> None:
        self.bound: Runnable[Any, BaseMessage] = self.model.bind_tools(
            [t.openai_schema() for t in self.tools]
        )
        self.system = SystemMessage(
            SYSTEM_PROMPT.format(tools=", ".join(t.name for t in self.tools))
        )

    def _start_task(
        self, state: AgentState, thread_id: str
    ) -> tuple[dict[str, Any], list[BaseMessage]]:
        """Reset the per-task fields; materialize a catalog task into the workspace."""
        fresh: dict[str, Any] = {
            "status": "running",
            "verify_attempts": 0,
            "verdict": None,
            "usage": zero_usage(),
        }
        task = state.get("task")
        if task and "instruction" not in task:
            workspace = ensure_workspace(self.data_dir, thread_id)
            spec = get_task(task["name"]).materialize(task.get("params"), workspace)
            return {**fresh, "task": spec}, [HumanMessage(spec["instruction"])]
        ensure_workspace(self.data_dir, thread_id)
        last = state["messages"][-1]
        freeform: TaskSpec = {
            "name": "freeform",
            "params": {},
            "instruction": str(last.content),
            "check": None,
            "policy": {},
        }
        return {**fresh, "task": freeform}, []

    @staticmethod
    def _is_new_input(state: AgentState) -> bool:
        task = state.get("task")
        if task and "instruction" not in task:
            return True
        messages = state.get("messages") or []
        return (
            bool(messages)
            and isinstance(messages[-1], HumanMessage)
            and (messages[-1].name != VERIFY_FEEDBACK_NAME)
        )

    async def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        started = time.monotonic()
        write = get_stream_writer()
        update: dict[str, Any] = {}
        added: list[BaseMessage] = []
        if self._is_new_input(state):
            update, added = self._start_task(state, thread_id_of(config))
        elif not state.get("messages"):
            raise ValueError("the input needs 'messages' or a 'task'")
        usage: Usage = {**(update.get("usage") or state.get("usage") or zero_usage())}
        messages = [*state.get("messages", []), *added]
        # Parallel tool calls of the last step ran side by side: count the slowest one.
        usage["seconds"] += max(
            (m.additional_kwargs.get("duration", 0.0) for m in _last_tool_results(messages)),
            default=0.0,
        )
        step = usage["steps"] + 1
        if usage["seconds"] >= self.limits.max_seconds:
            write(
                {"type": "budget", "exceeded": "seconds", "left": budget_left(usage, self.limits)}
            )
            return {**update, "messages": added, "usage": usage, "status": "budget_exceeded"}
        write({"type": "step", "node": "agent", "step": step})
        response = await self.bound.ainvoke([self.system, *messages], config)
        if not isinstance(response, AIMessage):  # pragma: no cover - chat models return AIMessage
            response = AIMessage(content=str(response.content))
        tokens = response.usage_metadata["total_tokens"] if response.usage_metadata else 0
        usage["steps"] = step
        usage["tokens"] += tokens
        usage["seconds"] += time.monotonic() - started
        status = "running" if response.tool_calls else "agent_done"
        write(
            {
                "type": "step_finished",
                "node": "agent",
                "step": step,
                "tool_calls": [{"name": c["name"], "id": c["id"]} for c in response.tool_calls],
                "tokens": tokens,
            }
        )
        write({"type": "budget", "left": budget_left(usage, self.limits)})
        out: dict[str, Any] = {
            **update,
            "messages": [*added, response],
            "step": step,
            "usage": usage,
        }
        # An unchanged status is not written again: every channel write is a row in
        # checkpoint_writes (about 190 bytes), on every step of a long thread.
        if status != update.get("status", state.get("status")):
            out["status"] = status
        return out


def _last_tool_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    out: list[ToolMessage] = []
    for m in reversed(messages):
        if not isinstance(m, ToolMessage):
            break
        out.append(m)
    return out
