"""The offline model: a deterministic chat model that plays scripted plans for the demo tasks.

It is not a language model. It recognizes the shipped demo tasks by the marker line their
instruction ends with, and replies with that task's scripted plan: real ``AIMessage`` objects with
``tool_calls`` (parallel ones included), so every path of the service runs without a network. Any
other request gets an answer saying that no model is configured and how to configure one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from agent.context_summary import compacted_view, conversation_length
from agent.tasks import CATALOG, find_marker, plan_view

OFFLINE_MODEL_NAME = "threadline-offline (scripted demo plans, not a language model)"

NOT_CONFIGURED = (
    "No language model is configured: threadline is running its offline model, which only plays "
    "the scripted demo tasks (try `threadline tasks`). To answer free-form requests, set "
    "OPENAI_API_KEY (and OPENAI_BASE_URL for vLLM, Ollama or another OpenAI-compatible server, "
    "OPENAI_MODEL for the model name) and restart threadline."
)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class OfflineChatModel(BaseChatModel):
    """Scripted, deterministic replies for the demo tasks (see module docstring)."""

    @property
    def _llm_type(self) -> str:
        return "threadline-offline"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Plans name the tools they call, so binding changes nothing."""
        return self

    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The scripted reply to a conversation."""
        found = find_marker(messages)
        task = CATALOG.get(found[0]) if found else None
        if found is None or task is None or task.plan is None:
            # Free text, or an operator's task: only a real model can do those.
            message = AIMessage(content=NOT_CONFIGURED)
        else:
            _, params, start = found
            # A context compaction's summary stands for the replies it removed.
            view = compacted_view(plan_view(messages, start), messages[start + 1 :])
            planned = task.plan(task.parse_params(params), view)
            # Ids derive from the conversation's length (counting what summaries stand for), so
            # a re-run step repeats the same ids (and the same idempotency keys) while ids never
            # repeat within a thread.
            length = conversation_length(messages)
            message = AIMessage(
                content=planned.content,
                tool_calls=[
                    {
                        "name": c.name,
                        "args": c.args,
                        "id": f"call_{length}_{i}",
                        "type": "tool_call",
                    }
                    for i, c in enumerate(planned.calls)
                ],
            )
        prompt = sum(_estimate_tokens(str(m.content)) for m in messages)
        completion = _estimate_tokens(str(message.content) + str(message.tool_calls))
        message.usage_metadata = {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
        }
        message.response_metadata = {"model_name": OFFLINE_MODEL_NAME}
        return message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self.reply(messages)
        words = str(message.content).split(" ")
        for i, word in enumerate(words):
            last = i == len(words) - 1
            chunk = AIMessageChunk(
                content=word + ("" if last else " "),
                tool_call_chunks=[
                    {"name": tc["name"], "args": json.dumps(tc["args"]), "id": tc["id"], "index": j}
                    for j, tc in enumerate(message.tool_calls)
                ]
                if last
                else [],
                usage_metadata=message.usage_metadata if last else None,
                response_metadata=message.response_metadata if last else {},
            )
            if run_manager:
                run_manager.on_llm_new_token(
                    str(chunk.content), chunk=ChatGenerationChunk(message=chunk)
                )
            yield ChatGenerationChunk(message=chunk)
