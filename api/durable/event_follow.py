"""Following a run's stored events: every one after a sequence number, in order, then live ones
as they are stored, until its ``end``, whatever the protocol that sends them.

The SSE of the LangGraph API (``api.http.sse``), A2A's ``SubscribeToTask`` and AG-UI's reconnect
all read through :func:`follow`: a client that drops and comes back with the last number it saw
(on any replica, after a crash of the one that served it) gets what came after it, nothing
twice. Events are published only after their commit (``api.durable.event_writer``), so nothing
followed is ever not stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from api.durable.hub import Hub, Subscription
from api.platform.database import Pool
from api.platform.db_health import is_database_fault
from api.store import events, runs

OUTAGE_READ_DELAY = 0.2
"""Before a stream reads again after a database fault."""

Row = dict[str, Any]
"""A stored event: ``seq`` (its number), ``event`` (its name) and ``data`` (JSON text)."""


async def follow(pool: Pool, hub: Hub, run_id: str, *, after: int) -> AsyncIterator[list[Row]]:
    """The run's stored events after ``after``, in batches (one read, or one stored batch), then
    live ones, until (and with) ``end``. Ends without ``end`` when the run is removed (a
    rollback). A database outage keeps the stream waiting until the database answers again."""
    last = after
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
                            # reconnected): send the end again rather than wait forever.
                            rows = await events.end_at_or_before(conn, run_id, last)
                except Exception as err:
                    await outlast(pool, err)
                    continue  # read again: ``read`` is still set
                resumed_past_end = False
                read = False
            for i, row in enumerate(rows):
                if row["event"] == "end":
                    yield rows[: i + 1]
                    return
            if rows:
                last = waiter.last = rows[-1]["seq"]
                yield rows
                continue
            timed_out = False
            try:
                # No task per wait, as wait_for. The hub polls for a run executing elsewhere
                # (``Hub.poll``): a lost notification costs latency, never an event.
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
                    await outlast(pool, err)
    finally:
        hub.unsubscribe(run_id, waiter)


async def outlast(pool: Pool, err: Exception) -> None:
    """A read failed: if the database went away, wait until it answers (the stream stays open)
    and let the caller read again; any other error is raised."""
    if not is_database_fault(err):
        raise err
    pool.health.fault(err)
    await asyncio.sleep(OUTAGE_READ_DELAY)  # a lost connection with the server up: not at once
    await pool.health.wait_up()


def _take_contiguous(waiter: Subscription, last: int) -> list[Row]:
    """Published events that continue right after ``last``; older ones are dropped."""
    buffer = waiter.buffer
    while buffer and buffer[0][0] <= last:
        buffer.popleft()
    rows: list[Row] = []
    while buffer and buffer[0][0] == last + len(rows) + 1:
        seq, event, data = buffer.popleft()
        rows.append({"seq": seq, "event": event, "data": data})
    return rows
