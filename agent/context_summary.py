"""The summary message of a context compaction (``agent.context``), and what it stands for.

A compaction replaces older turns with ONE human message named ``context_summary``. Its
``additional_kwargs`` carry :class:`SummaryCounts`: how many messages it replaced, and how many of
them were AI replies and feedback messages of the current task. The offline model's plans count
replies (``agent.tasks.base.plan_view``) and derive call ids from the conversation's length, so it
reads these counts (:func:`compacted_view`, :func:`conversation_length`) to carry on exactly as if
nothing had been removed. A real model reads the summary's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypedDict, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent.tasks.base import MARKER, PlanView

SUMMARY_NAME = "context_summary"
"""``name`` of the summary message (a ``HumanMessage``)."""
SUMMARY_KEY = "context_summary"
"""Key of :class:`SummaryCounts` in the summary message's ``additional_kwargs``."""
SUMMARY_HEADER = "[Context compacted: a summary of {n} earlier messages]\n"
VERIFY_NAME = "verify"
"""``name`` of the acceptance check's feedback messages (``agent.nodes.verify``)."""


class SummaryCounts(TypedDict):
    messages: int
    """Messages of the original conversation this summary stands for."""
    replies: int
    """AI replies among them that came after the current task's message."""
    feedback: int
    """Feedback messages (failed checks) among them after the current task's message."""


def summary_counts(message: BaseMessage) -> SummaryCounts | None:
    """The counts of a summary message, ``None`` for any other message."""
    if not isinstance(message, HumanMessage) or message.name != SUMMARY_NAME:
        return None
    counts = message.additional_kwargs.get(SUMMARY_KEY)
    if not isinstance(counts, dict):
        return None
    return cast(SummaryCounts, counts)


def is_summary(message: BaseMessage) -> bool:
    return summary_counts(message) is not None


def count_removed(removed: Sequence[BaseMessage], *, after_task: Sequence[bool]) -> SummaryCounts:
    """What a summary of ``removed`` stands for; ``after_task[i]``: ``removed[i]`` came after the
    current task's message. An earlier summary among them adds its own counts."""
    out: SummaryCounts = {"messages": 0, "replies": 0, "feedback": 0}
    for message, after in zip(removed, after_task, strict=True):
        inner = summary_counts(message)
        if inner is not None:
            out["messages"] += inner["messages"]
            if after:
                out["replies"] += inner["replies"]
                out["feedback"] += inner["feedback"]
            continue
        out["messages"] += 1
        if after and isinstance(message, AIMessage):
            out["replies"] += 1
        elif after and isinstance(message, HumanMessage):
            out["feedback"] += 1
    return out


def summary_message(text: str, counts: SummaryCounts, *, message_id: str) -> HumanMessage:
    """The summary message; ``message_id`` is the first removed message's, so the summary takes
    its place in the conversation (``add_messages`` replaces a message by id in place)."""
    body = SUMMARY_HEADER.format(n=counts["messages"]) + neutralize(text)
    return HumanMessage(
        content=body,
        name=SUMMARY_NAME,
        id=message_id,
        additional_kwargs={SUMMARY_KEY: dict(counts)},
    )


def neutralize(text: str) -> str:
    """``text`` without task markers, so a summary is never taken for a task's message."""
    return MARKER.sub(lambda m: m.group(0).replace("threadline task:", "earlier task:"), text)


def _render(message: BaseMessage, width: int) -> str:
    def cut(text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"

    if is_summary(message):
        return cut(message.text.split("\n", 1)[-1])
    if isinstance(message, AIMessage):
        said = f"assistant: {message.text}" if message.text else "assistant:"
        made = "; ".join(f"{c['name']}({_args(c['args'])})" for c in message.tool_calls)
        return cut(f"{said} called {made}" if made else said)
    if isinstance(message, ToolMessage):
        return cut(f"{message.name or 'tool'} [{message.status}]: {message.text}")
    role = "check" if message.name == VERIFY_NAME else message.type
    return cut(f"{role}: {message.text}")


def _args(args: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def digest(removed: Sequence[BaseMessage], max_chars: int) -> str:
    """A trimmed digest of ``removed``: one line per message, each cut to its share of
    ``max_chars`` (the offline model's summary, and a real model's summarization input)."""
    if not removed or max_chars <= 0:
        return ""
    width = max(24, max_chars // len(removed) - 1)
    text = "\n".join(_render(m, width) for m in removed)
    return text if len(text) <= max_chars else text[: max(0, max_chars - 1)] + "…"


def conversation_length(messages: Sequence[BaseMessage]) -> int:
    """How many messages the conversation would hold had nothing been compacted."""
    return sum(c["messages"] if (c := summary_counts(m)) else 1 for m in messages)


def compacted_view(view: PlanView, tail: Sequence[BaseMessage]) -> PlanView:
    """``view`` (of the messages ``tail`` after the task's) with the replies and feedback that
    summaries in ``tail`` stand for; a summary itself is not feedback."""
    replies, feedback = view.replies, view.feedback
    for message in tail:
        counts = summary_counts(message)
        if counts is not None:
            replies += counts["replies"]
            feedback += counts["feedback"] - 1
    return replace(view, replies=replies, feedback=feedback)
