"""Habits of OpenAI-compatible servers the model adapter smooths over, seen with llama.cpp's
server (``llama-cpp-python`` 0.3) and replayed here by a variant of the scripted server:

- its streamed tool calls repeat the call's name and id in every chunk;
- it streams no usage, even when asked (``stream_options.include_usage``);
- it refuses (500) an assistant message whose ``content`` is ``null``;
- it ignores ``max_completion_tokens``, reading only the classic ``max_tokens``.

The last two are the request bodies' adaptation (``agent.models.compatible_http``): every way of
calling the model, its retries and its timeout go through it; OpenAI itself is left alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent.models.compatible_http import AsyncCompatibleClient, CompatibleClient, compatible_request
from agent.models.openai_model import openai_chat_model
from tests.utils.fake_openai import ErrorReply, FakeOpenAIServer, Reply, ToolCall

READ_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


class LlamaLikeServer(FakeOpenAIServer):
    """Streams like llama-cpp-python: every tool-call chunk names its call, no usage chunk."""

    async def _stream(
        self, body: dict[str, Any], reply: Reply, include_usage: bool
    ) -> AsyncIterator[bytes]:
        names: dict[int, tuple[str, str]] = {}
        async for raw in super()._stream(body, reply, False):
            text = raw.decode()
            if not text.startswith("data: {"):
                yield raw
                continue
            event = json.loads(text[len("data: ") :])
            for call in event["choices"][0]["delta"].get("tool_calls") or []:
                if call.get("id"):
                    names[call["index"]] = (call["id"], call["function"]["name"])
                call_id, name = names[call["index"]]
                call.update(id=call_id, type="function")
                call["function"]["name"] = name
            yield f"data: {json.dumps(event)}\n\n".encode()


async def test_streamed_calls_keep_one_name_and_usage_is_estimated() -> None:
    call = ToolCall("read_file", {"path": "notes.txt"}, id="call_1")
    async with LlamaLikeServer([Reply(tool_calls=(call,))]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url)
        chunks = [c async for c in model.bind_tools([READ_TOOL]).astream([HumanMessage("read")])]
    assert len(chunks) > 3  # the arguments came in fragments, each chunk naming the call
    message = chunks[0]
    for chunk in chunks[1:]:
        message += chunk
    assert message.tool_calls == [
        {"name": "read_file", "args": {"path": "notes.txt"}, "id": "call_1", "type": "tool_call"}
    ]
    usage = message.usage_metadata
    assert usage is not None and usage["input_tokens"] > 10 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert message.response_metadata["usage_estimated"] is True


async def test_a_server_that_streams_usage_is_not_estimated() -> None:
    async with FakeOpenAIServer([Reply("hi", prompt_tokens=7, completion_tokens=1)]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url)
        chunks = [c async for c in model.astream([HumanMessage("hello")])]
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert [u["total_tokens"] for u in usage] == [8]
    assert not any(c.response_metadata.get("usage_estimated") for c in chunks)


async def test_a_call_only_assistant_message_is_sent_with_empty_content() -> None:
    history: list[Any] = [
        HumanMessage("read notes.txt"),
        AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": "n"}, "id": "c1"}]),
        ToolMessage("no such file", tool_call_id="c1", status="error"),
    ]
    async with FakeOpenAIServer(["done"]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url)
        await model.ainvoke(history)
    sent = server.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["content"] == "" and sent[1]["tool_calls"][0]["id"] == "c1"


async def test_the_answer_cap_is_sent_as_max_tokens() -> None:
    async with FakeOpenAIServer(["ok"]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url, max_tokens=5)
        await model.ainvoke([HumanMessage("hi")])
    assert server.requests[0]["max_tokens"] == 5
    assert "max_completion_tokens" not in server.requests[0]


def call_history() -> list[BaseMessage]:
    """A conversation whose assistant message only calls a tool (``content`` null as sent)."""
    return [
        HumanMessage("read notes.txt"),
        AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": "n"}, "id": "c1"}]),
        ToolMessage("no such file", tool_call_id="c1", status="error"),
    ]


def assert_adapted(body: dict[str, Any], cap: int = 5) -> None:
    assert body["messages"][1]["role"] == "assistant" and body["messages"][1]["content"] == ""
    assert body["max_tokens"] == cap and "max_completion_tokens" not in body


def test_sync_calls_and_streams_send_the_adapted_body() -> None:
    with FakeOpenAIServer(["done", "done"]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url, max_tokens=5)
        assert model.invoke(call_history()).content == "done"
        assert "".join(str(c.content) for c in model.stream(call_history())) == "done"
    assert [body.get("stream", False) for body in server.requests] == [False, True]
    for body in server.requests:
        assert_adapted(body)


async def test_a_cap_bound_at_call_time_is_sent_as_max_tokens_when_streaming() -> None:
    async with FakeOpenAIServer(["done"]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url)
        chunks = [c async for c in model.bind(max_tokens=7).astream(call_history())]
    assert "".join(str(c.content) for c in chunks) == "done"
    assert server.requests[0]["stream"] is True
    assert_adapted(server.requests[0], cap=7)


async def test_a_retry_sends_the_adapted_body_again() -> None:
    async with FakeOpenAIServer([ErrorReply(503, "overloaded"), "done"]) as server:
        model = openai_chat_model(
            api_key=server.api_key, base_url=server.base_url, max_tokens=5, max_retries=1
        )
        assert (await model.ainvoke(call_history())).content == "done"
    assert len(server.requests) == 2
    for body in server.requests:
        assert_adapted(body)


async def test_an_adapted_request_keeps_its_own_timeout() -> None:
    """The request's timeout (here one call's, shorter than the client's) carries over."""

    async def slow(_: dict[str, Any]) -> str:
        await asyncio.sleep(2)
        return "too late"

    async with FakeOpenAIServer(responder=slow) as server:
        model = openai_chat_model(
            api_key=server.api_key, base_url=server.base_url, max_tokens=5, max_retries=0
        )
        with pytest.raises(openai.APITimeoutError):
            await model.bind(timeout=0.3).ainvoke(call_history())
    assert len(server.requests) == 1
    assert_adapted(server.requests[0])


def test_only_a_compatible_server_gets_the_adapting_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    for base_url in (None, "https://api.openai.com/v1"):
        model: Any = openai_chat_model(api_key="k", base_url=base_url)
        assert model.http_client is None and model.http_async_client is None
    model = openai_chat_model(api_key="k", base_url="http://vllm:8000/v1")
    assert isinstance(model.http_client, CompatibleClient)
    assert isinstance(model.http_async_client, AsyncCompatibleClient)
    monkeypatch.setenv("OPENAI_API_BASE", "http://localhost:11434/v1")
    model = openai_chat_model(api_key="k")
    assert model.openai_api_base == "http://localhost:11434/v1"
    assert isinstance(model.http_async_client, AsyncCompatibleClient)


def test_a_body_that_needs_nothing_is_sent_as_built() -> None:
    url = "http://vllm:8000/v1/chat/completions"
    plain = httpx2.Request("POST", url, json={"messages": [{"role": "user", "content": "hi"}]})
    assert compatible_request(plain) is plain
    listing = httpx2.Request("GET", "http://vllm:8000/v1/models")
    assert compatible_request(listing) is listing
    call = {"role": "assistant", "content": None, "tool_calls": []}
    adapted = compatible_request(httpx2.Request("POST", url, json={"messages": [call]}))
    assert json.loads(adapted.content) == {"messages": [{**call, "content": ""}]}
    assert adapted.headers["content-length"] == str(len(adapted.content))
