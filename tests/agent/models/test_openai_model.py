"""openai_chat_model against a local OpenAI-compatible server (real HTTP, no network)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from agent.models.openai_model import openai_chat_model
from tests.utils.fake_openai import ErrorReply, FakeOpenAIServer, Reply, ToolCall

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ADD_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
PARALLEL_CALLS = [
    ToolCall("get_weather", {"city": "Paris, France"}, id="call_weather_1"),
    ToolCall("add", {"a": 2, "b": 40}, id="call_add_1"),
]
EXPECTED_TOOL_CALLS = [
    ("get_weather", {"city": "Paris, France"}, "call_weather_1"),
    ("add", {"a": 2, "b": 40}, "call_add_1"),
]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def make_model(server: FakeOpenAIServer, **kwargs: Any) -> Any:
    return openai_chat_model(api_key=server.api_key, base_url=server.base_url, **kwargs)


def test_factory_configuration() -> None:
    model = openai_chat_model(
        api_key="sk-x", base_url="http://vllm:8000/v1", model="qwen", timeout=5, max_retries=7
    )
    assert isinstance(model, ChatOpenAI)
    assert model.stream_usage is True
    assert model.temperature == 0
    assert model.use_responses_api is False
    assert model.model_name == "qwen"
    assert model.openai_api_base == "http://vllm:8000/v1"
    assert model.request_timeout == 5
    assert model.max_retries == 7
    assert isinstance(model.openai_api_key, SecretStr)
    assert model.openai_api_key.get_secret_value() == "sk-x"


async def test_plain_text_reply_with_usage(server: FakeOpenAIServer) -> None:
    server.add_replies(Reply("Hello from the fake!", prompt_tokens=21, completion_tokens=5))

    msg = await make_model(server).ainvoke([HumanMessage("hi")])

    assert isinstance(msg, AIMessage)
    assert msg.content == "Hello from the fake!"
    assert msg.tool_calls == []
    assert msg.usage_metadata is not None
    assert msg.usage_metadata["input_tokens"] == 21
    assert msg.usage_metadata["output_tokens"] == 5
    assert msg.usage_metadata["total_tokens"] == 26

    [request] = server.requests
    assert request["model"] == "gpt-4o-mini"
    assert request["temperature"] == 0
    assert not request.get("stream")
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert server.request_headers[0]["authorization"] == f"Bearer {server.api_key}"


async def test_bind_tools_parallel_tool_calls(server: FakeOpenAIServer) -> None:
    server.add_replies(PARALLEL_CALLS)
    model = make_model(server).bind_tools([WEATHER_TOOL, ADD_TOOL])

    msg = await model.ainvoke([HumanMessage("Weather in Paris, and what is 2+40?")])

    assert isinstance(msg, AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in msg.tool_calls] == EXPECTED_TOOL_CALLS
    assert msg.invalid_tool_calls == []
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    assert msg.usage_metadata is not None
    assert msg.usage_metadata["total_tokens"] > 0

    [request] = server.requests
    assert request["tools"] == [WEATHER_TOOL, ADD_TOOL]


async def test_astream_merges_tool_call_fragments(server: FakeOpenAIServer) -> None:
    server.add_replies(Reply(tool_calls=PARALLEL_CALLS, prompt_tokens=40, completion_tokens=17))
    model = make_model(server).bind_tools([WEATHER_TOOL, ADD_TOOL])

    chunks = [c async for c in model.astream([HumanMessage("Weather and sum, please.")])]

    # The arguments really arrived in pieces: some chunk carries a fragment that is
    # not JSON on its own.
    fragments = [tc["args"] for c in chunks for tc in c.tool_call_chunks if tc["args"]]
    assert len(fragments) >= 4
    assert any(not _is_json(fragment) for fragment in fragments)

    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert isinstance(merged, AIMessageChunk)
    assert [(c["name"], c["args"], c["id"]) for c in merged.tool_calls] == EXPECTED_TOOL_CALLS
    assert merged.invalid_tool_calls == []
    assert merged.usage_metadata is not None
    assert merged.usage_metadata["input_tokens"] == 40
    assert merged.usage_metadata["output_tokens"] == 17
    assert merged.usage_metadata["total_tokens"] == 57

    [request] = server.requests
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert [t["function"]["name"] for t in request["tools"]] == ["get_weather", "add"]


async def test_astream_text(server: FakeOpenAIServer) -> None:
    server.add_replies("The quick brown fox jumps.")

    chunks = [c async for c in make_model(server).astream("go")]

    text_chunks = [c.content for c in chunks if c.content]
    assert len(text_chunks) > 1
    assert "".join(str(t) for t in text_chunks) == "The quick brown fox jumps."
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert len(usage) == 1
    assert usage[0]["total_tokens"] == usage[0]["input_tokens"] + usage[0]["output_tokens"] > 0


async def test_second_turn_sends_tool_results(server: FakeOpenAIServer) -> None:
    def responder(request_json: dict[str, Any]) -> str:
        results = {
            m["tool_call_id"]: m["content"] for m in request_json["messages"] if m["role"] == "tool"
        }
        return f"weather={results['call_weather_1']}; sum={results['call_add_1']}"

    server.add_replies(PARALLEL_CALLS)
    server.set_responder(responder)
    model = make_model(server).bind_tools([WEATHER_TOOL, ADD_TOOL])
    history: list[Any] = [HumanMessage("Weather in Paris, and what is 2+40?")]

    first = await model.ainvoke(history)
    assert isinstance(first, AIMessage)
    history.append(first)
    results = {"get_weather": "sunny, 21C", "add": "42"}
    history.extend(
        ToolMessage(results[call["name"]], tool_call_id=call["id"]) for call in first.tool_calls
    )
    second = await model.ainvoke(history)

    assert second.content == "weather=sunny, 21C; sum=42"
    assert len(server.requests) == 2
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_weather_1", "call_add_1"]
    assert json.loads(sent[1]["tool_calls"][1]["function"]["arguments"]) == {"a": 2, "b": 40}
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("call_weather_1", "sunny, 21C"),
        ("call_add_1", "42"),
    ]


async def test_wrong_api_key_raises(server: FakeOpenAIServer) -> None:
    server.add_replies("never served")
    model = openai_chat_model(api_key="sk-wrong", base_url=server.base_url)

    with pytest.raises(openai.AuthenticationError) as excinfo:
        await model.ainvoke("hi")

    assert excinfo.value.status_code == 401
    assert excinfo.value.code == "invalid_api_key"
    assert len(server.requests) == 1  # 401 is not retried
    assert server.request_headers[0]["authorization"] == "Bearer sk-wrong"
    assert server.pending_replies == 1


async def test_scripted_error_reply_is_retried(server: FakeOpenAIServer) -> None:
    server.add_replies(ErrorReply(500, "boom"), "recovered")

    msg = await make_model(server, max_retries=1).ainvoke("hi")

    assert msg.content == "recovered"
    assert len(server.requests) == 2


async def test_exhausted_script_fails_loudly(server: FakeOpenAIServer) -> None:
    with pytest.raises(openai.InternalServerError, match="no scripted reply left"):
        await make_model(server, max_retries=0).ainvoke("hi")


async def test_models_endpoint_and_auth(server: FakeOpenAIServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        ok = await client.get("/models", headers={"Authorization": f"Bearer {server.api_key}"})
        denied = await client.get("/models")

    assert ok.status_code == 200
    assert [m["id"] for m in ok.json()["data"]] == ["gpt-4o-mini"]
    assert denied.status_code == 401
    assert denied.json()["error"]["code"] == "invalid_api_key"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
