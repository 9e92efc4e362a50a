"""Checks at the door: every JSON request body goes through :func:`~api.http.json_body.parse_body`
(the routes use :class:`CheckedRoute`): valid UTF-8 JSON, finite numbers, integers within 64
bits, no NUL character and no unpaired surrogate in any string or key (PostgreSQL text and
``jsonb`` cannot hold them), at most ``MAX_JSON_DEPTH`` levels of nesting. Path and query
parameters are bounded by the types below."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import Path, Query, Request, Response
from fastapi.routing import APIRoute
from starlette.types import Scope

from api.http.json_body import parse_body
from api.platform.validation import MAX_ID_LENGTH, MAX_OFFSET, THREAD_ID_PATTERN, THREAD_ID_RULE

ThreadId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=THREAD_ID_PATTERN,
        description=f"The thread's id: {THREAD_ID_RULE}.",
    ),
]
RunId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="The run's id (a UUID).")
]
AssistantId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="An assistant's id (a UUID), or a served graph's name (its default one).",
    ),
]
Limit = Annotated[int, Query(ge=1, le=1000, description="At most this many items (1-1000).")]
Offset = Annotated[
    int, Query(ge=0, le=MAX_OFFSET, description="Skip this many items (0 to 2^53 - 1).")
]


class CheckedRoute(APIRoute):
    """A route whose JSON body is parsed by :func:`parse_body` before FastAPI reads it.

    FastAPI then validates the already-parsed value (``Request.json()`` returns it), so a body
    is parsed once. A body labelled ``text/plain`` (or not labelled) is taken as JSON too, as
    LangGraph Server takes it: the JS SDK in a browser and agent-chat-ui's ``/api`` proxy send
    JSON that way. Any other type that is not JSON is refused (422) as before.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            body = await request.body()
            if body:
                parsed = parse_body(body)
                if _unlabelled_json(request.headers.get("content-type")):
                    _label_as_json(request.scope)
                request = ParsedRequest(request, body, parsed)
            return await handler(request)

        return checked


class ParsedRequest(Request):
    """The request FastAPI reads a checked body from: the same scope and ``receive`` (a
    disconnect is seen), its body already read and parsed."""

    def __init__(self, request: Request, body: bytes, parsed: Any) -> None:
        super().__init__(request.scope, request.receive)
        self.read = body
        self.parsed = parsed

    async def stream(self) -> AsyncGenerator[bytes, None]:
        yield self.read
        yield b""

    async def body(self) -> bytes:
        return self.read

    async def json(self) -> Any:
        return self.parsed


def _unlabelled_json(content_type: str | None) -> bool:
    """No content type, or ``text/plain``: a JSON body sent without its label."""
    return (content_type or "text/plain").split(";")[0].strip().lower() in ("", "text/plain")


def _label_as_json(scope: Scope) -> None:
    """Relabel the request's body as JSON (what FastAPI reads to take it as JSON)."""
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
    scope["headers"] = [*headers, (b"content-type", b"application/json")]
