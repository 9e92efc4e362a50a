"""A small, scripted OpenAI-compatible Chat Completions server for tests.

Real HTTP, no network: the server listens on 127.0.0.1 and answers
``POST /v1/chat/completions`` (plain JSON and SSE streaming), ``GET /v1/models`` and
``POST /v1/embeddings`` (texts, not token arrays; ``encoding_format`` ``float`` or ``base64`` as
OpenAI's: ``FakeOpenAIServer(embedder=...)`` computes them, :func:`hash_embedder` by default, and
an embedder's ``ValueError`` is a 400).

Replies are scripted. A reply is any of

* ``str`` - an assistant text message;
* ``ToolCall`` or a list of them - one or several (parallel) tool calls;
* ``Reply`` - text and/or tool calls with optional usage overrides;
* ``ErrorReply`` - an HTTP error with an OpenAI-style error body (429, 500, ...).

Queued replies (``FakeOpenAIServer(replies=[...])`` / ``server.add_replies(...)``) are
used first, in order; once the queue is empty, ``responder(request_json)`` is asked
(it may be sync or async). With neither, the server answers 500 so the test fails
loudly.

    with FakeOpenAIServer(replies=["hello"]) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url)
        ...
        assert server.requests[0]["messages"][-1]["content"] == "hi"

Run it by hand with ``python -m tests.utils.fake_openai --port 8765`` (echo responder).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import inspect
import itertools
import json
import math
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeAlias

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

__all__ = [
    "DEFAULT_API_KEY",
    "DEFAULT_MODEL",
    "ErrorReply",
    "FakeOpenAIServer",
    "Reply",
    "ReplyLike",
    "Responder",
    "ToolCall",
    "count_tokens",
    "echo_responder",
    "hash_embedder",
]

DEFAULT_API_KEY = "sk-fake-openai-test-key"
DEFAULT_MODEL = "gpt-4o-mini"


@dataclass(frozen=True)
class ToolCall:
    """One tool call in an assistant reply.

    ``arguments`` may be a dict (serialised with ``json.dumps``) or a raw string, which
    is sent verbatim (handy for testing malformed arguments). ``id`` defaults to
    ``call_<n>`` with a per-server counter (``call_1``, ``call_2``, ...).
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """An assistant reply: text, tool calls, or both.

    ``prompt_tokens`` / ``completion_tokens`` override the computed usage.
    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else
    ``"stop"``.
    """

    content: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class ErrorReply:
    """Answer with an HTTP error and an OpenAI-style ``{"error": {...}}`` body."""

    status_code: int = 500
    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | None = None


ReplyLike: TypeAlias = str | ToolCall | Sequence[ToolCall] | Reply | ErrorReply
Responder: TypeAlias = Callable[[dict[str, Any]], ReplyLike | Awaitable[ReplyLike]]


_USED_PORTS: set[int] = set()
_USED_PORTS_LOCK = threading.Lock()


def count_tokens(text: str) -> int:
    """Rough, deterministic token estimate: one token per four characters, at least 1."""
    return max(1, math.ceil(len(text) / 4))


def echo_responder(request_json: dict[str, Any]) -> ReplyLike:
    """Default responder for manual runs: echo the last user message."""
    for message in reversed(request_json.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                content = " ".join(
                    part.get("text", "") for part in content if isinstance(part, dict)
                )
            return f"You said: {content}"
    return "Hello from fake OpenAI."


Embedder: TypeAlias = Callable[[list[str]], list[list[float]]]


def hash_embedder(texts: list[str], dims: int = 8) -> list[list[float]]:
    """Default embeddings: each word hashed into one of ``dims`` dimensions (deterministic)."""
    out = []
    for text in texts:
        vector = [0.0] * dims
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dims] += 1.0
        out.append(vector)
    return out


def _normalize(reply: ReplyLike) -> Reply | ErrorReply:
    if isinstance(reply, Reply | ErrorReply):
        return reply
    if isinstance(reply, str):
        return Reply(content=reply)
    if isinstance(reply, ToolCall):
        return Reply(tool_calls=(reply,))
    calls = tuple(reply)
    if not calls or not all(isinstance(call, ToolCall) for call in calls):
        raise TypeError(f"not a scripted reply: {reply!r}")
    return Reply(tool_calls=calls)


def _split_words(text: str) -> list[str]:
    """Split text into word-sized pieces (each keeps its trailing whitespace)."""
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


def _split_fragments(text: str, parts: int = 3) -> list[str]:
    """Split a string into ``parts`` roughly equal fragments (fewer if it is short)."""
    if not text:
        return [""]
    size = max(1, math.ceil(len(text) / parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class FakeOpenAIServer:
    """Scripted OpenAI-compatible server running uvicorn in a background thread.

    Args:
        replies: initial queue of scripted replies, consumed in order.
        responder: ``responder(request_json) -> ReplyLike`` (sync or async), used once
            the queue is empty.
        embedder: ``embedder(texts) -> vectors`` for ``/v1/embeddings``.
        api_key: the only key accepted in ``Authorization: Bearer <key>``.
        model: model id listed by ``GET /v1/models``.
        host / port: where to listen; port 0 picks a free port.
        chunk_delay: seconds to sleep between streamed chunks (for slow-stream tests).

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` (valid once started).
        api_key, model, port.
        requests: every ``/chat/completions`` JSON body received, in order, including
            those rejected for a bad key.
        request_headers: the headers of those requests, same order (lower-case keys).
        embedding_requests: every ``/embeddings`` JSON body received, in order.

    Use as ``with FakeOpenAIServer(...) as server:`` or ``async with``, or call
    ``start()`` / ``stop()`` yourself.
    """

    def __init__(
        self,
        replies: Iterable[ReplyLike] = (),
        *,
        responder: Responder | None = None,
        embedder: Embedder = hash_embedder,
        api_key: str = DEFAULT_API_KEY,
        model: str = DEFAULT_MODEL,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_delay: float = 0.0,
    ) -> None:
        self.api_key = api_key
        self.model = model
        self.host = host
        self.port = port
        self.chunk_delay = chunk_delay
        self.responder = responder
        self.embedder = embedder
        self.requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self._replies: deque[ReplyLike] = deque(replies)
        self._lock = threading.Lock()
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = self._build_app()

    # -- scripting ----------------------------------------------------------------

    def add_replies(self, *replies: ReplyLike) -> None:
        """Append replies to the queue."""
        with self._lock:
            self._replies.extend(replies)

    def set_responder(self, responder: Responder | None) -> None:
        """Replace the fallback responder used once the queue is empty."""
        self.responder = responder

    @property
    def pending_replies(self) -> int:
        """How many queued replies have not been served yet."""
        with self._lock:
            return len(self._replies)

    @property
    def last_request(self) -> dict[str, Any]:
        """The most recent request body (raises ``IndexError`` if there is none)."""
        with self._lock:
            return self.requests[-1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle ----------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> FakeOpenAIServer:
        if self._thread is not None:
            raise RuntimeError("FakeOpenAIServer already started")
        sock = self._bind()
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            name=f"fake-openai-{self.port}",
            daemon=True,
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                sock.close()
                raise RuntimeError("FakeOpenAIServer failed to start")
            time.sleep(0.005)
        return self

    def _bind(self) -> socket.socket:
        # langchain-openai caches one httpx client per (base_url, timeout) for the whole
        # process; reusing a port from an earlier test would hand a later test (running on
        # a new event loop) that stale client. So never hand out the same port twice.
        for _ in range(50):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            port = sock.getsockname()[1]
            with _USED_PORTS_LOCK:
                if self.port or port not in _USED_PORTS:
                    _USED_PORTS.add(port)
                    return sock
            sock.close()
        raise RuntimeError("FakeOpenAIServer: no unused port found")

    def stop(self, timeout: float = 10.0) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        self._server = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeOpenAIServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # -- HTTP app -----------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.api_key}"

    def _unauthorized(self) -> JSONResponse:
        return JSONResponse(
            _error_body(
                "Incorrect API key provided. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            ),
            status_code=401,
        )

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="fake-openai", docs_url=None, redoc_url=None, openapi_url=None)

        @app.get("/v1/models")
        async def list_models(request: Request) -> Response:
            if not self._authorized(request):
                return self._unauthorized()
            return JSONResponse(
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.model,
                            "object": "model",
                            "created": 1_700_000_000,
                            "owned_by": "fake-openai",
                        }
                    ],
                }
            )

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            try:
                body = await request.json()
            except ValueError:
                body = None
            if not isinstance(body, dict):
                return JSONResponse(
                    _error_body(
                        "Request body must be a JSON object.", "invalid_request_error", None
                    ),
                    status_code=400,
                )
            with self._lock:
                self.requests.append(body)
                self.request_headers.append(dict(request.headers))
            if not self._authorized(request):
                return self._unauthorized()
            reply = await self._next_reply(body)
            if isinstance(reply, ErrorReply):
                return JSONResponse(
                    _error_body(reply.message, reply.type, reply.code),
                    status_code=reply.status_code,
                )
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return StreamingResponse(
                    self._stream(body, reply, include_usage),
                    media_type="text/event-stream",
                    headers={"Cache-Control": "no-cache"},
                )
            return JSONResponse(self._completion(body, reply))

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> Response:
            body = await request.json()
            with self._lock:
                self.embedding_requests.append(body)
            if not self._authorized(request):
                return self._unauthorized()
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                message = "fake_openai: send texts, not token arrays"
                return JSONResponse(_error_body(message, "invalid_request_error", None), 400)
            try:
                vectors = self.embedder(texts)
            except ValueError as err:
                return JSONResponse(_error_body(str(err), "invalid_request_error", None), 400)
            base64_wanted = body.get("encoding_format") == "base64"
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": _base64_floats(v) if base64_wanted else v,
                }
                for i, v in enumerate(vectors)
            ]
            tokens = sum(count_tokens(t) for t in texts)
            return JSONResponse(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model") or "text-embedding-3-small",
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )

        return app

    async def _next_reply(self, body: dict[str, Any]) -> Reply | ErrorReply:
        with self._lock:
            queued = self._replies.popleft() if self._replies else None
        if queued is not None:
            return _normalize(queued)
        if self.responder is None:
            return ErrorReply(500, "fake_openai: no scripted reply left", "server_error")
        result = self.responder(body)
        if inspect.isawaitable(result):
            result = await result
        return _normalize(result)

    # -- response bodies ----------------------------------------------------------

    def _resolve_calls(self, reply: Reply) -> list[tuple[str, ToolCall]]:
        return [(call.id or f"call_{next(self._call_ids)}", call) for call in reply.tool_calls]

    def _usage(
        self, body: dict[str, Any], reply: Reply, calls: list[tuple[str, ToolCall]]
    ) -> dict[str, int]:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt_text = json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", []))
            prompt = count_tokens(prompt_text)
        completion = reply.completion_tokens
        if completion is None:
            completion_text = (reply.content or "") + "".join(
                call.name + call.arguments_json() for _, call in calls
            )
            completion = count_tokens(completion_text)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _envelope(self, body: dict[str, Any], obj: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{next(self._completion_ids):06d}",
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "system_fingerprint": "fp_fake_openai",
        }

    @staticmethod
    def _finish_reason(reply: Reply) -> str:
        if reply.finish_reason is not None:
            return reply.finish_reason
        return "tool_calls" if reply.tool_calls else "stop"

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        calls = self._resolve_calls(reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for call_id, call in calls
            ]
        return {
            **self._envelope(body, "chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish_reason(reply),
                }
            ],
            "usage": self._usage(body, reply, calls),
        }

    async def _stream(
        self, body: dict[str, Any], reply: Reply, include_usage: bool
    ) -> AsyncIterator[bytes]:
        calls = self._resolve_calls(reply)
        envelope = self._envelope(body, "chat.completion.chunk")

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            data: dict[str, Any] = {
                **envelope,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if include_usage:
                data["usage"] = None
            return data

        deltas: list[dict[str, Any]] = [
            {"role": "assistant", "content": "" if reply.content is not None else None}
        ]
        if reply.content:
            deltas.extend({"content": piece} for piece in _split_words(reply.content))
        for index, (call_id, call) in enumerate(calls):
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            deltas.extend(
                {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
                for fragment in _split_fragments(call.arguments_json())
            )

        events = [chunk(delta) for delta in deltas]
        events.append(chunk({}, self._finish_reason(reply)))
        if include_usage:
            events.append({**envelope, "choices": [], "usage": self._usage(body, reply, calls)})

        for event in events:
            yield f"data: {json.dumps(event)}\n\n".encode()
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
        yield b"data: [DONE]\n\n"


def _base64_floats(vector: list[float]) -> str:
    """A vector as OpenAI's ``encoding_format="base64"`` sends it: little-endian float32."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI-compatible API (echo).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--api-key", default=DEFAULT_API_KEY)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args(argv)
    server = FakeOpenAIServer(responder=echo_responder, api_key=args.api_key, model=args.model)
    print(
        f"fake OpenAI at http://{args.host}:{args.port}/v1  (api key: {args.api_key})",
        flush=True,
    )
    uvicorn.run(server.app, host=args.host, port=args.port, log_level="info", ws="none")


if __name__ == "__main__":
    main()
