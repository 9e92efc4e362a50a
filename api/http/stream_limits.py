"""Limits on SSE streams: how many one client may hold open, and dropping a client that stopped
reading (``api.http.sse`` applies the send timeout).

- **A cap per client** (``THREADLINE_MAX_STREAMS_PER_CLIENT``): the client is the authenticated
  identity when the server has authentication, else the address it connects from. A stream over
  the cap is refused with 429 and ``Retry-After`` before anything else is done (a
  ``/runs/stream`` over it creates no run). The count is per process: behind N replicas a client
  may hold N times as many.
- **Dropping a connection** whose client accepts nothing: closing it the usual way (uvicorn's
  ``transport.close()``) first writes out what the server buffered for it, which a client that
  never reads never allows, so the connection and its buffer would stay. ``abort`` discards the
  buffer and closes the socket at once. It needs the connection's transport, which an ASGI app
  does not get: ``expose_transport``, around the app uvicorn serves (``api.server``), puts it in
  the scope from outside Starlette's middleware stack (whose outermost layer wraps ``send``,
  where the server's transport is found). It reads it from uvicorn's ``send`` (a method of the
  request's cycle, which holds the transport): uvicorn offers no public way, and a server
  without it gets no transport (the server then closes the connection itself).
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth.context import caller
from api.auth.user import NOBODY
from api.http.error_responses import ErrorBody

TRANSPORT = "threadline.transport"
"""Scope key of the connection's transport (uvicorn's), when the server exposes one."""
RETRY_AFTER_SECONDS = 5
"""What a refused client is told to wait: streams end with their runs, or when clients close."""
DISCONNECT_WAIT_SECONDS = 1.0

TOO_MANY_STREAMS: dict[int | str, dict[str, Any]] = {
    429: {
        "model": ErrorBody,
        "description": "This client already holds THREADLINE_MAX_STREAMS_PER_CLIENT streams on "
        "this server: close one it no longer reads, then retry after `Retry-After` seconds.",
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "schema": {"type": "integer"},
            }
        },
    }
}
"""OpenAPI ``responses=`` entry of the routes that open a stream."""


class Slot:
    """One stream a client holds: counts against its cap until ``release`` (idempotent)."""

    def __init__(self, counts: dict[str, int], key: str) -> None:
        self._counts = counts
        self.key = key
        self.released = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        left = self._counts[self.key] - 1
        if left:
            self._counts[self.key] = left
        else:
            del self._counts[self.key]

    def __enter__(self) -> Slot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:  # refused before its stream began (404, 409, 422, ...)
            self.release()


class StreamSlots:
    """The streams each client holds on this process."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def claim(self, key: str, who: str, limit: int) -> Slot:
        """A slot for one more stream of client ``key``; 429 when it holds ``limit`` already
        (``0``: no limit)."""
        held = self.counts.get(key, 0)
        if limit and held >= limit:
            raise HTTPException(
                429,
                f"Too many streams: this client ({who}) already holds {held} open on this "
                "server, the most THREADLINE_MAX_STREAMS_PER_CLIENT allows. Close streams it no "
                f"longer reads (each also ends with its run) and retry in {RETRY_AFTER_SECONDS} "
                "s, or ask the operator to raise the limit.",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        self.counts[key] = held + 1
        return Slot(self.counts, key)


def client_of(scope: Scope) -> tuple[str, str]:
    """(the key the cap counts by, how a message names it): the authenticated identity, else the
    address the request came from."""
    user = caller()
    if user is not NOBODY and user.is_authenticated:
        return f"identity:{user.identity}", f"identity {user.identity!r}"
    client = scope.get("client")
    address = str(client[0]) if client else "unknown"
    return f"address:{address}", f"address {address}"


def claim_stream(request: Request, limit: int) -> Slot:
    """A slot for one more stream of the request's client, released by the stream's end; use it
    as a context manager around what may refuse the request before the stream starts."""
    state = request.app.state
    slots: StreamSlots | None = getattr(state, "stream_slots", None)
    if slots is None:
        slots = state.stream_slots = StreamSlots()
    key, who = client_of(request.scope)
    return slots.claim(key, who, limit)


@runtime_checkable
class _Abortable(Protocol):
    def abort(self) -> None: ...


class _ExposeTransport:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # uvicorn's ``send`` is a method of the request's cycle, which holds the transport.
            transport = getattr(getattr(send, "__self__", None), "transport", None)
            if isinstance(transport, _Abortable):  # asyncio's, or uvloop's (not a subclass)
                scope[TRANSPORT] = transport
        await self.app(scope, receive, send)


def expose_transport(app: ASGIApp) -> ASGIApp:
    """``app`` as uvicorn serves it (``api.server``): every HTTP scope carries the transport of
    its connection (``TRANSPORT``), for ``abort``; outside all of the app's middleware."""
    return _ExposeTransport(app)


async def abort(scope: Scope, send: Send) -> bool:
    """Close the request's connection at once, discarding what the server buffered for it
    (``False`` when the server exposes no transport: it closes the connection itself)."""
    transport = scope.get(TRANSPORT)
    if not isinstance(transport, _Abortable):
        return False
    transport.abort()
    # The response's end, for the server: its send returns once it saw the connection go (or
    # writes into the void), and a response it finds unfinished is logged as an error.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(DISCONNECT_WAIT_SECONDS):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    return True
