"""SSE delivery of a run's stored events: replay from a sequence number, then follow live."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Message, Receive, Scope, Send

from api.durable.hub import Hub, Subscription
from api.durable.stream_modes import base_mode, event_names
from api.http.messages_mode import MessagesTranslator, derives
from api.http.stream_limits import Slot, abort
from api.platform.database import Pool
from api.platform.db_health import is_database_fault
from api.platform.errors import Invalid
from api.platform.metrics import SSE_CLIENTS
from api.store import events, runs

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0
CONTROL_EVENTS = {"metadata", "error", "end"}
OUTAGE_READ_DELAY = 0.2
"""Before a stream reads again after a database fault."""
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
                try:
                    async with pool.connection() as conn:
                        rows = await events.read(conn, run_id, last)
                        if not rows and resumed_past_end:
                            # Resumed at or past the end (a client that saw ``end`` and
                            # reconnected): send the end again rather than heartbeats forever.
                            rows = await events.end_at_or_before(conn, run_id, last)
                except Exception as err:
                    await _outlast(pool, err)
                    continue  # read again: ``read`` is still set
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
                mode = base_mode(row["event"])
                if translator is not None and mode == "messages":
                    for event, data in translator.feed(row["data"]):
                        frames.append(_frame(data, event, row["seq"], first))
                        first = False
                elif mode in names:
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
                    try:
                        async with pool.connection() as conn:
                            if await runs.by_id(conn, run_id) is None:
                                return  # removed (a rollback): nothing more will come
                    except Exception as err:
                        await _outlast(pool, err)
    finally:
        hub.unsubscribe(run_id, waiter)


async def _outlast(pool: Pool, err: Exception) -> None:
    """A read failed: if the database went away, wait until it answers (the stream stays open,
    with its heartbeats) and let the caller read again; any other error is raised."""
    if not is_database_fault(err):
        raise err
    pool.health.fault(err)
    await asyncio.sleep(OUTAGE_READ_DELAY)  # a lost connection with the server up: not at once
    await pool.health.wait_up()


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
