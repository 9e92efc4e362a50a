"""A failing model request names the endpoint, the model and the settings that bound it.

The run that hits one ends in error with this message (``api.engine.execution``), so it must say
where and why without a traceback; the exception's type stays the OpenAI client's own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import HumanMessage

from agent.models.openai_model import openai_chat_model
from tests.utils.fake_openai import ErrorReply, FakeOpenAIServer
from tests.utils.processes import free_port


async def _consume(model: Any, streaming: bool) -> None:
    if streaming:
        async for _ in model.astream([HumanMessage("hi")]):
            pass
    else:
        await model.ainvoke([HumanMessage("hi")])


@pytest.mark.parametrize("streaming", [False, True])
async def test_timeout_names_endpoint_and_settings(streaming: bool) -> None:
    async def slow(_: dict[str, Any]) -> str:
        await asyncio.sleep(3)
        return "too late"

    async with FakeOpenAIServer(responder=slow, model="tiny") as server:
        model = openai_chat_model(
            api_key=server.api_key,
            base_url=server.base_url,
            model="tiny",
            timeout=0.3,
            max_retries=1,
        )
        with pytest.raises(openai.APITimeoutError) as caught:
            await _consume(model, streaming)
    assert str(caught.value) == (
        f"the model endpoint {server.base_url} (tiny) did not answer within 0.3 s "
        "(OPENAI_TIMEOUT; 1 retries, OPENAI_MAX_RETRIES): Request timed out."
    )
    assert len(server.requests) == 2


@pytest.mark.parametrize("streaming", [False, True])
async def test_server_error_names_endpoint_and_status(streaming: bool) -> None:
    async with FakeOpenAIServer([ErrorReply(503, "overloaded")]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url, max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            await _consume(model, streaming)
    text = str(caught.value)
    assert text.startswith(f"the model endpoint {server.base_url} (gpt-4o-mini) answered HTTP 503")
    assert "overloaded" in text and caught.value.status_code == 503


async def test_unreachable_endpoint_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    model = openai_chat_model(api_key="k", base_url=url, max_retries=0, timeout=2)
    with pytest.raises(openai.APIConnectionError) as caught:
        await _consume(model, False)
    assert (
        str(caught.value)
        == f"cannot reach the model endpoint {url} (gpt-4o-mini): Connection error."
    )


def test_openai_itself_is_named_without_a_base_url() -> None:
    model: Any = openai_chat_model(api_key="k")
    err = openai.APIConnectionError(request=httpx.Request("POST", "https://api.openai.com/v1"))
    model.explain(err)
    model.explain(err)  # explaining twice does not stack
    where = "the model endpoint https://api.openai.com/v1 (gpt-4o-mini)"
    assert str(err) == f"cannot reach {where}: Connection error."
