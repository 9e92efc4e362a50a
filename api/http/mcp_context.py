"""What an MCP handler of either endpoint runs with: the request's caller and door
(:func:`acting_as`), and the shape of a tool result (:func:`result`, :func:`error`).

- The SDK may run a handler in another task than the HTTP request's: the Guard's caller travels
  in the request's ASGI scope (:data:`CALLER_KEY`, put there by ``McpEndpoint``) and
  :func:`acting_as` makes it the caller again, with the door ``mcp`` for the audit log.
- A tool's failure is a result with ``isError: true`` whose text says what to do, never a
  protocol error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
import orjson
from starlette.types import Scope

from api.auth.context import caller, door, set_caller, set_door
from api.runs.service import Service

CALLER_KEY = "threadline.caller"
"""Where ``McpEndpoint`` leaves the Guard's caller in the request's ASGI scope."""

Context = Any
"""The SDK's ``ServerRequestContext`` (its ``request`` is the HTTP request)."""


def request_scope(ctx: Context) -> Scope:
    request = ctx.request
    if request is None:
        raise RuntimeError("threadline's MCP endpoints are served over HTTP only")
    scope: Scope = request.scope
    return scope


@contextmanager
def acting_as(ctx: Context) -> Iterator[tuple[Service, Scope]]:
    """The service and request scope of a handler, with the request's caller (and the door,
    ``mcp``, for the audit log) set meanwhile."""
    scope = request_scope(ctx)
    previous, previous_door = caller(), door()
    set_caller(scope[CALLER_KEY])
    set_door("mcp")
    try:
        yield scope["app"].state.service, scope
    finally:
        set_caller(previous)
        set_door(previous_door)


def result(structured: dict[str, Any], *, error: bool = False, text: str | None = None) -> Any:
    """A tool result: text (JSON of ``structured`` unless given) plus ``structuredContent``."""
    if text is None:
        text = orjson.dumps(structured, default=str).decode()
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured, is_error=error
    )


def error(message: str) -> Any:
    """An ``isError`` result that says what to do (never a protocol error)."""
    return result({"ok": False, "error": message}, error=True, text=message)
