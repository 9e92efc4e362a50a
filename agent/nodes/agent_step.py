"""The ``agent`` node: starts a task when new input arrives, then asks the model what to do."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig

from agent.context import ContextCompactor, default_budget, model_name_of
from agent.events import (
    BudgetEvent,
    CallsSupersededEvent,
    StepEvent,
    StepFinishedEvent,
    event_writer,
)
from agent.hooks import PRIOR_RESULT_KEY
from agent.limits import Limits, budget_left
from agent.state import AgentState, TaskSpec, Usage
from agent.tasks import FREEFORM, TaskCatalog
from agent.tasks.catalog import chat_task
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
    tasks: TaskCatalog

    def __post_init__(self) -> None:
        schemas = [t.openai_schema() for t in self.tools]
        self.bound: Runnable[Any, BaseMessage] = self.model.bind_tools(schemas)
        self.system = SystemMessage(
            SYSTEM_PROMPT.format(tools=", ".join(t.name for t in self.tools))
        )
        budget = self.limits.context_budget or default_budget(model_name_of(self.model))
        self.context = ContextCompactor(self.model, self.system, schemas, budget)

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
            # Only the name and the declared params are taken from the input: the instruction,
            # template, check and rules are the catalog's.
            spec = self.tasks.get(task["name"]).materialize(task.get("params"), workspace)
            return {**fresh, "task": spec}, [HumanMessage(spec["instruction"])]
        workspace = ensure_workspace(self.data_dir, thread_id)
        last = state["messages"][-1]
        try:
            named = chat_task(last.text)
            if named is not None:
                spec = self.tasks.get(named[0]).materialize(named[1], workspace)
                return {**fresh, "task": spec}, [HumanMessage(spec["instruction"])]
        except (KeyError, ValueError):
            pass  # not a task after all (the server refuses these with a 422): free text
        freeform: TaskSpec = {
            "name": FREEFORM,
            "params": {},
            "instruction": last.text,
            "check": self.tasks.check_for(None),
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
        write = event_writer()
        update: dict[str, Any] = {}
        added: list[BaseMessage] = []
        if self._is_new_input(state):
            update, added = self._start_task(state, thread_id_of(config))
            closing, closed_ids = await close_unanswered_calls(state.get("messages") or [], config)
            if closed_ids:
                added = [*closing, *added]
                superseded: CallsSupersededEvent = {
                    "type": "calls_superseded",
                    "tool_call_ids": closed_ids,
                }
                write(superseded)
        elif not state.get("messages"):
            raise ValueError("the input needs 'messages' or a 'task'")
        usage: Usage = {**(update.get("usage") or state.get("usage") or zero_usage())}
        added = _with_ids(added)  # a compaction may name them
        removed = _removed(added)
        messages: list[BaseMessage] = [m for m in state.get("messages", []) if m.id not in removed]
        messages += [m for m in added if not isinstance(m, RemoveMessage)]
        # Parallel tool calls of the last step ran side by side: count the slowest one.
        usage["seconds"] += max(
            (m.additional_kwargs.get("duration", 0.0) for m in _last_tool_results(messages)),
            default=0.0,
        )
        step = usage["steps"] + 1
        if usage["seconds"] >= self.limits.max_seconds:
            spent: BudgetEvent = {
                "type": "budget",
                "exceeded": "seconds",
                "left": budget_left(usage, self.limits),
            }
            write(spent)
            return {**update, "messages": added, "usage": usage, "status": "budget_exceeded"}
        starting: StepEvent = {"type": "step", "node": "agent", "step": step}
        write(starting)
        # Compacted in this step's update: a crash before it returns loses nothing (the step
        # runs again, and compacts again, from the last checkpoint).
        compaction = await self.context.fit(messages, config)
        if compaction is not None:
            added = [*added, *compaction.writes]
            messages = compaction.messages
            usage["tokens"] += compaction.tokens_used
            write(compaction.event)
        response = await self.bound.ainvoke([self.system, *messages], config)
        if not isinstance(response, AIMessage):  # pragma: no cover - chat models return AIMessage
            response = AIMessage(content=str(response.content))
        tokens = response.usage_metadata["total_tokens"] if response.usage_metadata else 0
        usage["steps"] = step
        usage["tokens"] += tokens
        usage["seconds"] += time.monotonic() - started
        status = "running" if response.tool_calls else "agent_done"
        answered: StepFinishedEvent = {
            "type": "step_finished",
            "node": "agent",
            "step": step,
            "tool_calls": [{"name": c["name"], "id": str(c["id"])} for c in response.tool_calls],
            "tokens": tokens,
        }
        write(answered)
        left: BudgetEvent = {"type": "budget", "left": budget_left(usage, self.limits)}
        write(left)
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


def _with_ids(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages``, each with an id."""
    return [m if m.id else m.model_copy(update={"id": str(uuid.uuid4())}) for m in messages]


def _last_tool_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    out: list[ToolMessage] = []
    for m in reversed(messages):
        if not isinstance(m, ToolMessage):
            break
        out.append(m)
    return out


def _removed(messages: list[BaseMessage]) -> set[str | None]:
    return {m.id for m in messages if isinstance(m, RemoveMessage)}


SUPERSEDED = "superseded by a new message"


async def close_unanswered_calls(
    messages: Sequence[BaseMessage], config: RunnableConfig
) -> tuple[list[BaseMessage], list[str]]:
    """When new input arrives while the last step's calls are unanswered (waiting for approval,
    or interrupted with the step), close each with a tool message, so the conversation stays
    valid for any OpenAI-compatible model: an assistant message with tool calls is followed by
    one tool message per call, before the next human message.

    A call the audit log shows as executed gets its recorded result; any other was not run and
    never will be: "superseded by a new message". The new human messages move after the tool
    messages (removed and added again under new ids).
    """
    end = len(messages)
    while end and isinstance(messages[end - 1], HumanMessage):
        end -= 1
    ai_at = next((i for i in range(end - 1, -1, -1) if isinstance(messages[i], AIMessage)), None)
    if ai_at is None:
        return [], []
    ai = messages[ai_at]
    assert isinstance(ai, AIMessage)
    answered = {m.tool_call_id for m in messages[ai_at + 1 : end] if isinstance(m, ToolMessage)}
    open_calls = [c for c in ai.tool_calls if c.get("id") and c["id"] not in answered]
    if not open_calls:
        return [], []
    configurable = config.get("configurable") or {}
    lookup = configurable.get(PRIOR_RESULT_KEY)
    thread_id = thread_id_of(config)
    out: list[BaseMessage] = []
    call_ids: list[str] = []
    new_input = messages[end:]
    out.extend(RemoveMessage(id=str(m.id)) for m in new_input if m.id)
    for call in open_calls:
        prior = await lookup(f"{thread_id}:{call['id']}") if lookup is not None else None
        if prior is not None:
            content, ok = str(prior["content"]), bool(prior["ok"])
        else:
            content = (
                f"This call was not run: it was {SUPERSEDED} before it was approved or "
                "finished. Do not assume it took effect."
            )
            ok = False
        out.append(
            ToolMessage(
                content=content,
                tool_call_id=call["id"],
                name=call["name"],
                status="success" if ok else "error",
            )
        )
        call_ids.append(str(call["id"]))
    out.extend(m.model_copy(update={"id": None}) for m in new_input)
    return out, call_ids
