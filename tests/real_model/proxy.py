"""A proxy in front of a real OpenAI-compatible server: forwards, or delays, or answers 500.

It reuses ``FakeOpenAIServer``'s lifecycle (uvicorn in a thread on a fresh loopback port, the
``requests`` it records) and replaces its app:

- ``mode = "forward"``: every request goes to ``upstream`` and the answer (streamed or not)
  comes back unchanged. With ``force_tool`` set, a request that carries no tool result yet (the
  task's first model call) gets ``tool_choice`` naming that tool: llama.cpp's
  ``chatml-function-calling`` format then constrains the model to call it (a 135M model asked
  freely mostly answers in text);
- ``mode = "delay"``: waits ``delay`` seconds before forwarding (longer than the agent's
  ``OPENAI_TIMEOUT``: a timeout);
- ``mode = "error"``: answers HTTP 500 with an OpenAI-style error body.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from tests.utils.fake_openai import FakeOpenAIServer

ERROR_MESSAGE = "proxy: the model server is broken on purpose"


class ModelProxy(FakeOpenAIServer):
    def __init__(
        self,
        upstream: str,
        *,
        mode: Literal["forward", "delay", "error"] = "forward",
        force_tool: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.mode = mode
        self.force_tool = force_tool
        self.delay = delay
        super().__init__()

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="model-proxy", docs_url=None, redoc_url=None, openapi_url=None)

        @app.get("/v1/models")
        async def models() -> Response:
            async with httpx.AsyncClient(timeout=30) as client:
                answer = await client.get(self.upstream + "/models")
            return JSONResponse(answer.json(), status_code=answer.status_code)

        @app.post("/v1/chat/completions")
        async def completions(request: Request) -> Response:
            body: dict[str, Any] = await request.json()
            first_call = not any(m.get("role") == "tool" for m in body.get("messages", []))
            if self.force_tool and first_call:
                body["tool_choice"] = {"type": "function", "function": {"name": self.force_tool}}
            with self._lock:
                self.requests.append(body)
            if self.mode == "error":
                error = {"message": ERROR_MESSAGE, "type": "server_error", "code": None}
                return JSONResponse({"error": error}, status_code=500)
            if self.mode == "delay":
                await asyncio.sleep(self.delay)
                if await request.is_disconnected():  # the client gave up: spare the model
                    return Response(status_code=499)
            return await self._forward(body)

        return app

    async def _forward(self, body: dict[str, Any]) -> Response:
        client = httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=300.0))
        upstream = client.build_request("POST", self.upstream + "/chat/completions", json=body)
        answer = await client.send(upstream, stream=True)

        async def close() -> None:
            await answer.aclose()
            await client.aclose()

        return StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
            background=BackgroundTask(close),
        )
