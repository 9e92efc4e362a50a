"""SSE delivery of a run's stored events: replay from a sequence number, then follow live."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Message, Receive, Scope, Send

from api.database import Pool
from api.hub import Hub, Subscription
from api.messages_mode import MessagesTranslator, derives
from api.metrics import SSE_CLIENTS
from api.store import events, runs
from api.stream_modes import event_names

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
    """Every stored event after ``after`` in order, then live ones, until ``end``: SSE frames,
    those of one read or one stored batch together."""
    modes = list(modes)
    names = wanted(modes)
    translator = MessagesTranslator(modes) if derives(modes) else None
    last = after
    first = True
    # Before the first read: nothing published meanwhile is lost.
    waiter = hub.subscribe(run_id, last=after)
    # The table is read first, then whenever the buffer cannot serve; not first when this
    # process executes the run and stored nothing after ``after`` yet (a run this request just
    # started): everything after it comes to ``waiter`` (a gap in it still sends us to the table).
    read = not hub.stored_nothing_after(run_id, after)
    resumed_past_end = after > 0 and read  # checked on the first read only
    try:
        while True:
            waiter.clear()
            rows = [] if read else _take_contiguous(waiter, last)
            if not rows and (read or waiter.stale or waiter.buffer):
                waiter.stale = False
                async with pool.connection() as conn:
                    rows = await events.read(conn, run_id, last)
                    if not rows and resumed_past_end:
                        # Resumed at or past the end (a client that saw ``end`` and reconnected):
                        # send the end again rather than heartbeats forever.
                        rows = await events.end_at_or_before(conn, run_id, last)
                resumed_past_end = False
                read = False
            if translator is not None and after > 0:
                await _replay_before(pool, run_id, after, translator)
                after = 0
            # What one read (or one stored batch) holds goes out in one write to the client.
            frames: list[bytes] = []
            ended = False
            for row in rows:
                last = waiter.last = row["seq"]
                if translator is not None and row["event"] == "messages":
                    for event, data in translator.feed(row["data"]):
                        frames.append(_frame(data, event, row["seq"], first))
                        first = False
                elif row["event"] in names:
                    frames.append(_frame(row["data"], row["event"], row["seq"], first))
                    first = False
                if row["event"] == "end":
                    ended = True
                    break
            if frames:
                yield b"".join(frames)
            if ended:
                return
            if not rows:
                timed_out = False
                try:
                    # No task per wait, as wait_for. The hub polls for a run executing
                    # elsewhere (``Hub.poll``): a lost notification costs latency, never an event.
                    async with asyncio.timeout(hub.wait_seconds()):
                        await waiter.wait()
                except TimeoutError:
                    read = timed_out = True
                if timed_out or waiter.gone:  # is the run still there?
                    waiter.gone = False
                    async with pool.connection() as conn:
                        if await runs.by_id(conn, run_id) is None:
                            return  # removed (a rollback): nothing more will come
    finally:
        hub.unsubscribe(run_id, waiter)


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
            if row["event"] == "messages":
                translator.replay(row["data"])
            seen = row["seq"]
        if not rows:
            return


def _take_contiguous(waiter: Subscription, last: int) -> list[dict[str, Any]]:
    """Published events that continue right after ``last``; older ones are dropped."""
    buffer = waiter.buffer
    while buffer and buffer[0][0] <= last:
        buffer.popleft()
    rows: list[dict[str, Any]] = []
    while buffer and buffer[0][0] == last + len(rows) + 1:
        seq, event, data = buffer.popleft()
        rows.append({"seq": seq, "event": event, "data": data})
    return rows


def parse_last_event_id(value: str | None) -> int:
    """``Last-Event-ID``: a sequence number; ``-1`` (or none) replays from the first event."""
    if value is None or value.strip() == "":
        return 0
    try:
        seq = int(value)
    except ValueError:
        from api.errors import Invalid

        raise Invalid(
            f"Last-Event-ID must be an event id from this run's stream (an integer), not {value!r}"
        ) from None
    return max(seq, 0)


class CountedEventSourceResponse(EventSourceResponse):
    """An SSE response counted in ``threadline_sse_clients`` while it is being sent: from the
    ASGI call until it returns (the stream ended, or the client went away)."""

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if self.send_timeout is None:  # no timeout: no cancel scope per event
            await send(message)
        else:
            await super()._send_with_timeout(send, message)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        SSE_CLIENTS.inc()
        try:
            await super().__call__(scope, receive, send)
        finally:
            SSE_CLIENTS.dec()


def sse_response(
    stream: AsyncIterator[bytes] | AsyncIterator[ServerSentEvent],
    headers: dict[str, str] | None = None,
) -> EventSourceResponse:
    return CountedEventSourceResponse(
        stream,
        headers=headers,
        ping=HEARTBEAT_SECONDS,
        ping_message_factory=lambda: ServerSentEvent(comment="heartbeat"),
        sep="\n",
    )
