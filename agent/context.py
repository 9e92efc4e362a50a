"""Context compaction: every model call fits the model's context budget.

Before each model call the agent counts the tokens of what it would send: the system prompt, the
messages and the bound tools' schemas. The count is langchain-core's
``count_tokens_approximately``: about 4 characters per token, plus 3 tokens per message (role and
separators), names, tool calls and tool schemas included. No tokenizer is used: ``tiktoken``
downloads its encodings on first use, and a service must not hang on a network it may not have.

The budget is ``Limits.context_budget`` (``THREADLINE_CONTEXT_BUDGET``), by default the model's
known window (:data:`WINDOWS`, else :data:`DEFAULT_WINDOW`) minus room for its reply.

Above :data:`COMPACT_AT` of the budget, older turns are compacted: the task's message and the
latest turn always stay, the turns between them are removed oldest first until the rest fits in
:data:`COMPACT_TO` of the budget (so that not every later step compacts again), and ONE summary
message takes the place of the removed ones (``agent.context_summary``). A turn is never split:
an AI message with tool calls stays with (or goes with) every tool message that answers it
(:func:`turns`). With the offline model the summary is a trimmed digest of the removed turns;
with any other model, the model writes it. If what must stay does not fit in the budget, the step
fails with :class:`ContextBudgetError` instead of sending an over-budget request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from agent.context_summary import (
    VERIFY_NAME,
    count_removed,
    digest,
    is_summary,
    summary_message,
)
from agent.events import ContextCompactedEvent
from agent.models.offline import OfflineChatModel

COMPACT_AT = 0.8
"""Compact when a call would use more than this share of the budget."""
COMPACT_TO = 0.5
"""Remove old turns until the call uses at most this share (if what stays allows it)."""
DEFAULT_WINDOW = 32_000
"""The context window assumed for a model not in :data:`WINDOWS` (and the offline model)."""
WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-3.5-turbo", 16_385),
    ("smollm2", 8_192),
    ("qwen2.5", 32_768),
)
"""Known context windows, by model-name prefix (case-insensitive, any ``provider/`` dropped)."""
SUMMARY_PROMPT = (
    "You compact the history of an agent's conversation. Summarize the turns below for the "
    "agent, which continues the task without them: what was done, which tool calls were made "
    "and what they returned (files, values, errors), and what is left to do. Be factual and "
    "brief, at most {words} words. Do not call tools."
)


MIN_SUMMARY_TOKENS = 32
"""A compaction whose summary could not get this many tokens is not worth making."""
SUMMARY_OVERHEAD = 20
"""The summary message's header and role, in tokens."""


class ContextBudgetError(ValueError):
    """What must stay in the model's context does not fit its budget."""


def context_window(model_name: str | None) -> int:
    name = (model_name or "").lower().rsplit("/", 1)[-1]
    return next((w for prefix, w in WINDOWS if name.startswith(prefix)), DEFAULT_WINDOW)


def default_budget(model_name: str | None) -> int:
    """The model's window minus room for its reply (a quarter of it, at most 4,096 tokens)."""
    window = context_window(model_name)
    return window - min(4096, window // 4)


def model_name_of(model: BaseChatModel) -> str | None:
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return name if isinstance(name, str) else None


def count_tokens(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
    """The estimated tokens of a request (see the module docstring)."""
    return count_tokens_approximately(messages, tools=list(tools) or None)


def turns(messages: Sequence[BaseMessage]) -> list[range]:
    """The conversation cut into turns that are kept or removed whole.

    A tool message belongs with the message before it, and with the AI message whose call it
    answers, wherever that is: a cut never falls between a call and its result, nor before an
    orphan tool message (one no AI message asked for), which stays with its neighbour.
    """
    owner: dict[str, int] = {}
    reach = list(range(len(messages)))
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                owner.setdefault(str(call.get("id")), i)
        elif isinstance(message, ToolMessage) and i > 0:
            reach[i - 1] = max(reach[i - 1], i)
            asked = owner.get(message.tool_call_id)
            if asked is not None:
                reach[asked] = max(reach[asked], i)
    out: list[range] = []
    start, furthest = 0, -1
    for i in range(len(messages)):
        furthest = max(furthest, reach[i])
        if furthest == i:
            out.append(range(start, i + 1))
            start = i + 1
    return out


def task_index(messages: Sequence[BaseMessage]) -> int | None:
    """The current task's message: the latest human message that is neither a check's feedback
    nor a summary."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if (
            isinstance(message, HumanMessage)
            and message.name != VERIFY_NAME
            and not is_summary(message)
        ):
            return i
    return None


@dataclass
class Compaction:
    """One compaction: the state update, the conversation now sent, the event and its cost."""

    writes: list[BaseMessage]
    """Removals and the summary (replacing the first removed message): the node's update."""
    messages: list[BaseMessage]
    event: ContextCompactedEvent
    tokens_used: int
    """Tokens the summarizing model reported (0 for the offline digest)."""


@dataclass
class ContextCompactor:
    """Keeps ``[system, *messages]`` plus ``tools`` under ``budget`` tokens."""

    model: BaseChatModel
    system: SystemMessage
    tools: Sequence[dict[str, Any]]
    budget: int

    def __post_init__(self) -> None:
        self.fixed = count_tokens([self.system], self.tools)
        self.summary_tokens = max(48, min(1024, self.budget // 8))

    def tokens(self, messages: Sequence[BaseMessage]) -> int:
        return count_tokens([self.system, *messages], self.tools)

    def _too_big(self, tokens: int, what: str) -> ContextBudgetError:
        return ContextBudgetError(
            f"the model's context budget is {self.budget} tokens, but {what} takes about "
            f"{tokens} (estimated): raise THREADLINE_CONTEXT_BUDGET if the model's window "
            "allows it, or start a new thread with a shorter request"
        )

    def _removal(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Indexes of the messages to summarize: whole turns, oldest first, never the task's
        turn or the latest one."""
        spans = turns(messages)
        task = task_index(messages)
        removable = [s for s in spans[:-1] if task is None or task not in s]
        keep = self.fixed + self.summary_tokens + count_tokens(messages)
        target = COMPACT_TO * self.budget
        removed: list[int] = []
        for span in removable:
            if keep <= target:
                break
            keep -= count_tokens([messages[i] for i in span])
            removed.extend(span)
        return removed

    async def fit(
        self, messages: Sequence[BaseMessage], config: RunnableConfig
    ) -> Compaction | None:
        """``None`` when the call fits as it is; else the compaction that makes it fit."""
        before = self.tokens(messages)
        if before <= COMPACT_AT * self.budget:
            return None
        at = self._removal(messages)
        # The summary takes at most half of what it replaces, so a compaction always shrinks.
        cap = min(self.summary_tokens, count_tokens([messages[i] for i in at]) // 2)
        if cap < MIN_SUMMARY_TOKENS:
            if before > self.budget:
                raise self._too_big(before, "the task and the latest turn")
            return None
        task = task_index(messages)
        after_task = [task is not None and i > task for i in at]
        removed = [messages[i] for i in at]
        text, used = await self._summarize(removed, cap, config)
        counts = count_removed(removed, after_task=after_task)
        # The summary sits after the task's message when it replaces turns of the task.
        first = next((i for i, after in zip(at, after_task, strict=True) if after), at[0])
        summary = summary_message(text, counts, message_id=str(messages[first].id))
        gone = set(at) - {first}
        kept = [summary if i == first else m for i, m in enumerate(messages) if i not in gone]
        after = self.tokens(kept)
        if after > self.budget:
            raise self._too_big(after, "the task, the latest turn and a summary of the rest")
        event: ContextCompactedEvent = {
            "type": "context_compacted",
            "removed_messages": len(removed),
            "tokens_before": before,
            "tokens_after": after,
            "budget": self.budget,
            "summary": summary.text,
        }
        writes: list[BaseMessage] = [
            RemoveMessage(id=str(messages[i].id)) for i in at if i != first
        ]
        writes.append(summary)
        return Compaction(writes=writes, messages=kept, event=event, tokens_used=used)

    async def _summarize(
        self, removed: Sequence[BaseMessage], cap: int, config: RunnableConfig
    ) -> tuple[str, int]:
        """The summary's text (about ``cap`` tokens at most) and the tokens spent on it. The
        offline model is not a language model: it gets a trimmed digest. Any other model writes
        the summary itself."""
        max_chars = (cap - SUMMARY_OVERHEAD) * 3
        if isinstance(self.model, OfflineChatModel):
            return digest(removed, max_chars), 0
        prompt = SystemMessage(SUMMARY_PROMPT.format(words=max(10, cap // 2)))
        # The summarizing request fits the budget too, with room for the summary itself.
        room = self.budget - cap - count_tokens([prompt]) - 16
        transcript = digest(removed, max(200, room * 3))
        model: Runnable[Any, BaseMessage] = self.model
        # Imported here: langchain_openai (and openai) take about a second to import, which an
        # offline server, and every server start of the test suite, need not pay.
        from langchain_openai import ChatOpenAI

        if isinstance(self.model, ChatOpenAI):
            model = self.model.bind(max_tokens=cap)
        # Tagged ``nostream``: the summary is not streamed as the agent's text.
        quiet: RunnableConfig = {**config, "tags": [*(config.get("tags") or []), TAG_NOSTREAM]}
        reply = await model.ainvoke([prompt, HumanMessage(transcript)], quiet)
        usage = reply.usage_metadata if isinstance(reply, AIMessage) else None
        used = usage["total_tokens"] if usage else 0
        text = reply.text.strip() or digest(removed, max_chars)
        return (text if len(text) <= max_chars else text[: max_chars - 1] + "…"), used
