"""Chat model for OpenAI and any OpenAI-compatible server.

`base_url` (usually taken from the ``OPENAI_BASE_URL`` setting) points the model at
something other than api.openai.com: vLLM (``http://host:8000/v1``), Ollama
(``http://localhost:11434/v1``), llama.cpp's server, LiteLLM, or anything else that speaks the
Chat Completions API. Leave it ``None`` to use OpenAI itself.

Habits of OpenAI-compatible servers are smoothed over (all seen with llama.cpp's server,
``llama-cpp-python`` 0.3). Its HTTP clients (:mod:`agent.models.compatible_http`) send an
assistant message that only calls tools with ``content: ""`` rather than ``null`` (its request
schema refuses ``null``, with a 500) and the answer cap as ``max_tokens``. A streamed tool call
whose every chunk repeats the call's name and id is read as one name and id, not their
concatenation (``read_fileread_file...``). A server that streams no usage (the same one) gets
its tokens estimated as characters / 4, marked ``usage_estimated`` in the message's
``response_metadata``.

A request that fails (after the client's retries) raises the OpenAI client's own exception,
with a message that names the endpoint, the model and, for a timeout, the ``OPENAI_TIMEOUT``
and ``OPENAI_MAX_RETRIES`` settings: that message is what a run ending in error reports.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from agent.models.compatible_http import compatible_clients

TEMPERATURE = 0.0
"""The agent's sampling temperature on every OpenAI-compatible model (deterministic)."""
OPENAI_ENDPOINT = "https://api.openai.com/v1"
DETAIL_CHARS = 300
"""How much of the endpoint's own error message (its first line) a run's error quotes."""


class EndpointChatOpenAI(ChatOpenAI):
    """`ChatOpenAI` whose failures say which endpoint failed and how (see :func:`explain`)."""

    def explain(self, err: openai.APIError) -> None:
        """Reword ``err``'s message to name the endpoint and the model; its type stays, so
        callers that catch the client's exceptions still do."""
        if getattr(err, "endpoint_explained", False):  # _agenerate may run _astream: once
            return
        detail = err.message.strip().splitlines()[0][:DETAIL_CHARS] if err.message else ""
        where = f"the model endpoint {self.openai_api_base or OPENAI_ENDPOINT} ({self.model_name})"
        if isinstance(err, openai.APITimeoutError):
            text = (
                f"{where} did not answer within {self.request_timeout} s "
                f"(OPENAI_TIMEOUT; {self.max_retries} retries, OPENAI_MAX_RETRIES): {detail}"
            )
        elif isinstance(err, openai.APIConnectionError):
            text = f"cannot reach {where}: {detail}"
        elif isinstance(err, openai.APIStatusError):
            text = f"{where} answered HTTP {err.status_code}: {detail}"
        else:
            text = f"{where} failed: {detail}"
        err.message = text
        err.args = (text,)
        err.endpoint_explained = True  # type: ignore[attr-defined]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        except openai.APIError as err:
            self.explain(err)
            raise

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        try:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        except openai.APIError as err:
            self.explain(err)
            raise

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        seen: dict[tuple[int, str], str] = {}
        sent: list[ChatGenerationChunk] = []
        try:
            for chunk in super()._stream(messages, stop, run_manager, **kwargs):
                sent.append(_once(chunk, seen))
                yield chunk
            if (estimate := _estimated_usage(messages, kwargs, sent)) is not None:
                yield estimate
        except openai.APIError as err:
            self.explain(err)
            raise

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        seen: dict[tuple[int, str], str] = {}
        sent: list[ChatGenerationChunk] = []
        try:
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                sent.append(_once(chunk, seen))
                yield chunk
            if (estimate := _estimated_usage(messages, kwargs, sent)) is not None:
                yield estimate
        except openai.APIError as err:
            self.explain(err)
            raise


def _once(chunk: ChatGenerationChunk, seen: dict[tuple[int, str], str]) -> ChatGenerationChunk:
    """``chunk`` without a tool call's name or id where an earlier chunk of the same call (by
    index) carried exactly that value: chunks are concatenated, so a repeat would double it."""
    message = chunk.message
    if not isinstance(message, AIMessageChunk) or not message.tool_call_chunks:
        return chunk
    first: set[tuple[int, str]] = set()
    raw = message.additional_kwargs.get("tool_calls") or []
    parts: list[tuple[int | None, Any, str]] = [
        (p.get("index"), p, "name") for p in message.tool_call_chunks
    ] + [(p.get("index"), p, "id") for p in message.tool_call_chunks]
    parts += [(p.get("index"), p.get("function") or {}, "name") for p in raw]
    parts += [(p.get("index"), p, "id") for p in raw]
    for index, holder, key in parts:
        value = holder.get(key)
        if index is None or not value:
            continue
        if (index, key) not in seen:
            seen[(index, key)] = value
            first.add((index, key))
        elif seen[(index, key)] == value and (index, key) not in first:
            holder[key] = None
    return chunk


def _estimated_usage(
    messages: list[BaseMessage], kwargs: dict[str, Any], sent: list[ChatGenerationChunk]
) -> ChatGenerationChunk | None:
    """A last chunk with estimated usage (characters / 4) when the server streamed none, else
    None. OpenAI sends usage in a final chunk when asked (``stream_options.include_usage``);
    some compatible servers (llama.cpp's ``llama-cpp-python`` 0.3) ignore the option."""
    if any(isinstance(c.message, AIMessageChunk) and c.message.usage_metadata for c in sent):
        return None
    prompt = sum(len(str(m.content)) + len(json.dumps(_calls(m))) for m in messages)
    prompt += len(json.dumps(kwargs.get("tools") or []))
    answer = sum(len(str(c.message.content)) + len(json.dumps(_calls(c.message))) for c in sent)
    usage = UsageMetadata(
        input_tokens=math.ceil(prompt / 4),
        output_tokens=math.ceil(answer / 4),
        total_tokens=math.ceil(prompt / 4) + math.ceil(answer / 4),
    )
    chunk = AIMessageChunk(content="", usage_metadata=usage)
    chunk.response_metadata["usage_estimated"] = True
    return ChatGenerationChunk(message=chunk)


def _calls(message: BaseMessage) -> list[Any]:
    if isinstance(message, AIMessageChunk):
        return list(message.tool_call_chunks)
    return list(getattr(message, "tool_calls", None) or [])


def openai_chat_model(
    *,
    api_key: str,
    base_url: str | None = None,
    model: str = "gpt-4o-mini",
    timeout: float = 120.0,
    max_retries: int = 2,
    max_tokens: int | None = None,
) -> BaseChatModel:
    """Return a deterministic (temperature 0) `ChatOpenAI` on the Chat Completions API.

    `timeout` (``OPENAI_TIMEOUT``) bounds each wait on the endpoint: connecting, and each read,
    so a streamed answer may take longer as long as chunks keep coming. `max_retries`
    (``OPENAI_MAX_RETRIES``) is how often the client tries again after a timeout, a connection
    error or a 408/409/429/5xx answer, with its exponential back-off. `max_tokens`
    (``OPENAI_MAX_TOKENS``) caps each answer; None leaves it to the server.

    `stream_usage=True` asks the server for a final usage chunk when streaming
    (``stream_options.include_usage``), so token counts are available for streamed
    runs too; langchain only turns this on by itself for api.openai.com.
    `use_responses_api=False` keeps every model on ``/chat/completions``, the one
    endpoint OpenAI-compatible servers reliably implement.

    A server other than api.openai.com gets the HTTP clients of
    :mod:`agent.models.compatible_http`, which adapt each request body to it. Its URL is
    `base_url` or, without one, ``OPENAI_API_BASE``, as langchain resolves it; OpenAI itself
    keeps langchain's own clients.
    """
    endpoint = base_url or os.environ.get("OPENAI_API_BASE") or ""
    compatible = endpoint != "" and urlsplit(endpoint).hostname != "api.openai.com"
    http_client, http_async_client = (
        compatible_clients(endpoint, timeout) if compatible else (None, None)
    )
    return EndpointChatOpenAI(
        api_key=SecretStr(api_key),
        base_url=base_url,
        model=model,
        temperature=TEMPERATURE,
        timeout=timeout,
        max_retries=max_retries,
        max_tokens=max_tokens,
        stream_usage=True,
        use_responses_api=False,
        http_client=http_client,
        http_async_client=http_async_client,
    )
