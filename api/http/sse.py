"""SSE delivery of a run's stored events: replay from a sequence number, then follow live."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Message, Receive, Scope, Send

from api.durable.event_follow import follow
from api.durable.hub import Hub
from api.durable.stream_modes import base_mode, event_names
from api.http.messages_mode import MessagesTranslator, derives
from api.http.stream_limits import Slot, abort
from api.platform.database import Pool
from api.platform.errors import Invalid
from api.platform.metrics import SSE_CLIENTS
from api.store import events

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0
CONTROL_EVENTS = {"metadata", "error", "end"}
RETRY_MS = 1000
"""Sent with the first event: browsers reconnect after 1 s instead of their default 3 s."""


def _frame(data: str, event: str, seq: int, first: bool) -> bytes:
    return ServerSentEvent(
        data=data, event=event, id=str(seq), retry=RETRY_MS if first else None
    ).encode()


def wanted(modes: Iterable[str]) -> set[str]:
    """Event names delivered for the requested stream modes (control events always are)."""
    return event_names(modes) | CONTROL_EVENTS


async def run_events(
    pool: Pool,
    hub: Hub,
    run_id: str,
    *,
    after: int,
    modes: Iterable[str],
) -> AsyncIterator[bytes]:
    """Every stored event after ``after`` in order, then live ones, until ``end``
    (:func:`~api.durable.event_follow.follow`): SSE frames, those of one read or one stored batch
    together."""
    modes = list(modes)
    names = wanted(modes)
    translator = MessagesTranslator(modes) if derives(modes) else None
    if translator is not None and after > 0:
        await _replay_before(pool, run_id, after, translator)
    first = True
    async for rows in follow(pool, hub, run_id, after=after):
        # What one read (or one stored batch) holds goes out in one write to the client.
        frames: list[bytes] = []
        for row in rows:
            mode = base_mode(row["event"])
            if translator is not None and mode == "messages":
                for event, data in translator.feed(row["data"]):
                    frames.append(_frame(data, event, row["seq"], first))
                    first = False
            elif mode in names:
                frames.append(_frame(row["data"], row["event"], row["seq"], first))
                first = False
        if frames:
            yield b"".join(frames)


async def _replay_before(
    pool: Pool, run_id: str, after: int, translator: MessagesTranslator
) -> None:
    """Rebuild the accumulated messages a reader resuming after ``after`` already has."""
    seen = 0
    while seen < after:
        async with pool.connection() as conn:
            rows = await events.read(conn, run_id, seen)
        for row in rows:
            if row["seq"] > after:
                return
            if base_mode(row["event"]) == "messages":
                translator.replay(row["data"])
            seen = row["seq"]
        if not rows:
            return


def parse_last_event_id(value: str | None) -> int:
    """``Last-Event-ID``: a sequence number; ``-1`` (or none) replays from the first event."""
    if value is None or value.strip() == "":
        return 0
    try:
        seq = int(value)
    except ValueError:
        raise Invalid(
            f"Last-Event-ID must be an event id from this run's stream (an integer), not {value!r}"
        ) from None
    return max(seq, 0)


class ClientStoppedReading(Exception):
    """A send to the client did not complete within the stream's send timeout."""


class CountedEventSourceResponse(EventSourceResponse):
    """An SSE response counted in ``threadline_sse_clients`` while it is being sent: from the
    ASGI call until it returns (the stream ended, or the client went away).

    ``send_timeout``: a client that accepts nothing for that long (an event, a heartbeat or the
    end of the response cannot be written) is dropped: its connection is aborted with whatever
    the server buffered for it (``api.http.stream_limits.abort``). The run goes on (unless the
    client
    asked for ``on_disconnect: cancel``: dropped, it has gone away), and the client resumes with
    ``Last-Event-ID``. ``slot``: the client's stream count, released on any end.
    """

    def __init__(
        self,
        content: AsyncIterator[bytes] | AsyncIterator[ServerSentEvent],
        *,
        slot: Slot | None = None,
        send_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        # Not sse-starlette's ``send_timeout``: it leaves the response's last send untimed,
        # where a client that stopped reading waits forever once its run has ended.
        super().__init__(content, **kwargs)
        self.client_timeout = send_timeout
        self.slot = slot
        if slot is not None:
            weakref.finalize(self, slot.release)  # a response dropped before it was sent

    def _timed(self, send: Send) -> Send:
        limit = self.client_timeout
        if limit is None:
            return send

        async def timed(message: Message) -> None:
            deadline = asyncio.timeout(limit)
            try:
                async with deadline:
                    await send(message)
            except TimeoutError:
                if deadline.expired():
                    raise ClientStoppedReading from None
                raise

        return timed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        SSE_CLIENTS.inc()
        try:
            try:
                await super().__call__(scope, receive, self._timed(send))
            except* ClientStoppedReading:
                client = scope.get("client")
                logger.info(
                    "dropped an SSE client that accepted nothing for %s s "
                    "(THREADLINE_SSE_SEND_TIMEOUT_SECONDS): %s %s from %s; it can resume with "
                    "Last-Event-ID",
                    self.client_timeout,
                    scope.get("method"),
                    scope.get("path"),
                    client[0] if client else "an unknown address",
                )
                await abort(scope, send)
        finally:
            SSE_CLIENTS.dec()
            if self.slot is not None:
                self.slot.release()


def sse_response(
    stream: AsyncIterator[bytes] | AsyncIterator[ServerSentEvent],
    headers: dict[str, str] | None = None,
    *,
    slot: Slot | None = None,
    send_timeout: float | None = None,
) -> EventSourceResponse:
    """The response of a stream; ``slot`` and ``send_timeout`` as ``CountedEventSourceResponse``."""
    return CountedEventSourceResponse(
        stream,
        slot=slot,
        send_timeout=send_timeout,
        headers=headers,
        ping=HEARTBEAT_SECONDS,
        ping_message_factory=lambda: ServerSentEvent(comment="heartbeat"),
        sep="\n",
    )
