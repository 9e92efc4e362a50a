"""A request-body size limit (413) as plain ASGI middleware, so it also covers chunked bodies."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Refuse bodies over ``max_bytes`` with 413 and a JSON message."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _drain(self, receive: Receive, seen: int) -> None:
        """Read the rest of a refused body (up to a cap) so that closing the connection does
        not reset it before the client has read the 413 (a reset loses the answer)."""
        cap = max(8 * self.max_bytes, 1 << 20)
        while seen <= cap:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _refuse(self, send: Send, receive: Receive | None = None, seen: int = 0) -> None:
        if receive is not None:
            await self._drain(receive, seen)
        body = json.dumps(
            {
                "detail": f"Request body too large: the limit is {self.max_bytes} bytes "
                "(THREADLINE_MAX_BODY_BYTES). Send less, or put large data in the workspace."
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"connection", b"close")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._refuse(send, receive)
                    return
        seen = 0
        started = False
        exceeded = False
        complete = False

        async def limited_receive() -> Message:
            nonlocal seen, exceeded, complete
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                complete = not message.get("more_body", False)
                if seen > self.max_bytes:
                    exceeded = True
                    raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if exceeded:
                # FastAPI turns an exception while reading the body into its own 400;
                # answer 413 instead and drop the app's response.
                if not started and message["type"] == "http.response.start":
                    started = True
                    await self._refuse(send, None if complete else receive, seen)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                started = True
                await self._refuse(send, None if complete else receive, seen)


class _TooLarge(Exception):
    pass
