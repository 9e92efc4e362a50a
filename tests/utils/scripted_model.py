"""A chat model that replies from a script, for graph tests the offline model does not cover.

    model = ScriptedChatModel(replies=[
        call("list_files", path="."),                # one tool call
        [call("read_file", path="a"), call("read_file", path="b")],  # parallel calls
        AIMessage("done"),                           # a plain answer ends the agent's turn
        lambda messages: AIMessage(f"{len(messages)} messages"),  # computed from the prompt
    ])

Replies are used in order; ``repeat_last=True`` keeps answering with the last entry (useful
with a callable for a model that never stops). Every prompt the model received is kept in
``model.prompts``. ``bind_tools`` returns the model itself, so it works where a real chat model
is bound to tool schemas.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr

ScriptEntry: TypeAlias = AIMessage | ToolCall | list[ToolCall] | Callable[[list[BaseMessage]], Any]

_ids = itertools.count(1)


def call(name: str, /, **args: Any) -> ToolCall:
    """A tool call with a fresh, unique id."""
    return ToolCall(name=name, args=args, id=f"scripted_{next(_ids)}", type="tool_call")


def calls(*tool_calls: ToolCall, content: str = "", tokens: int | None = None) -> AIMessage:
    """An AI message making ``tool_calls`` (in parallel), optionally reporting ``tokens`` used."""
    message = AIMessage(content=content, tool_calls=list(tool_calls))
    if tokens is not None:
        message.usage_metadata = {
            "input_tokens": tokens,
            "output_tokens": 0,
            "total_tokens": tokens,
        }
    return message


class ScriptedChatModel(BaseChatModel):
    """Replies from ``replies`` in order (see module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: list[Any] = Field(default_factory=list)
    repeat_last: bool = False
    usage_metadata: dict[str, int] | None = None
    """Usage reported on every reply that has none of its own."""

    _position: int = PrivateAttr(default=0)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-test-model"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """Every prompt received, in order."""
        return self._prompts

    @property
    def calls_made(self) -> int:
        return len(self._prompts)

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _next_entry(self) -> ScriptEntry:
        if self._position < len(self.replies):
            entry = self.replies[self._position]
            self._position += 1
            return entry
        if self.repeat_last and self.replies:
            return self.replies[-1]
        raise AssertionError(
            f"the scripted model ran out of replies after {len(self.replies)} (prompt #"
            f"{len(self._prompts)}); add replies or set repeat_last=True"
        )

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        self._prompts.append(list(messages))
        entry = self._next_entry()
        if callable(entry) and not isinstance(entry, (AIMessage, dict, list)):
            entry = entry(list(messages))
        if isinstance(entry, dict):
            entry = calls(entry)
        elif isinstance(entry, list):
            entry = calls(*entry)
        if not isinstance(entry, AIMessage):
            raise TypeError(f"a script entry must give an AIMessage, not {entry!r}")
        message = entry.model_copy(deep=True)
        if message.usage_metadata is None and self.usage_metadata is not None:
            message.usage_metadata = dict(self.usage_metadata)  # type: ignore[assignment]
        return message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])
