"""Cross-process wake-ups over PostgreSQL ``LISTEN/NOTIFY``.

Events and runs live in tables; notifications only say "look again". A stream that misses one
(the listener reconnecting, say) still finds everything on its next read, which also happens on
a short poll, so a lost notification costs latency, never an event. The listener polls for every
stream of the process that waits on a run executing elsewhere, in one statement a second
(:meth:`Hub.poll`), and wakes those whose run has more events, or is gone; a stream reads the
table on a timer of its own only while there is no listener to poll for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import AsyncConnection

from api.platform.database import connection_kwargs
from api.store.events import EVENTS_CHANNEL, last_seqs
from api.store.runs import RUNS_CHANNEL

logger = logging.getLogger(__name__)

LISTENER_NAME = "threadline-hub"
"""``application_name`` of every process's listening connection: how a hub finds the others."""
PEERS_SECONDS = 1.0
"""How often the listener looks for other processes' listeners (:attr:`Hub.peers`) and polls
for the streams waiting on runs executing elsewhere (:meth:`Hub.poll`)."""
STREAM_POLL_SECONDS = 2.0
"""How long a stream waits for a wake-up before it reads the table itself, while this process's
listener is not connected (:meth:`Hub.wait_seconds`)."""
FALLBACK_SECONDS = 30.0
"""The same while the listener is connected: it polls for the stream every ``PEERS_SECONDS``,
and this only bounds the wait should a wake-up still be missed."""
OTHER_LISTENERS = (
    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
    " AND application_name = %s AND pid <> pg_backend_pid()) AS found"
)


class Subscription(asyncio.Event):
    """Set when a run gets new events. Events stored by this process arrive in ``buffer`` too
    (after their commit), so a local stream need not read them back; ``stale`` says a
    notification from another process came, which only a read of the table can serve."""

    def __init__(self, last: int | None = None) -> None:
        super().__init__()
        self.buffer: deque[tuple[int, str, str]] = deque()
        self.stale = False
        self.last = last
        """The last event its reader has, kept up to date by it: the hub's poll wakes it when
        the table holds more (None: not polled for; the reader reads on a timer of its own)."""
        self.gone = False
        """Set by the hub's poll when the run is no longer in the table (a rollback removed
        it)."""


class Hub:
    """One listening connection per process; in-process subscribers wait on asyncio events."""

    def __init__(self, url: str, on_lost: Callable[[BaseException], None] | None = None) -> None:
        self.url = url
        self.on_lost = on_lost
        """Told when the listener loses its connection or cannot connect
        (``api.platform.db_health``):
        the first sign of an outage while nothing else uses the database."""
        self._run_waiters: dict[str, set[Subscription]] = defaultdict(set)
        self._local_seq: dict[str, int] = {}
        self.runs_changed = asyncio.Event()
        self.on_cancel: Callable[[str], None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.peers = True
        """Whether another process listens on this database (a replica, a terminal run's
        in-process server): only then do stored events need a notification, as this process's
        own streams take them from :meth:`publish`. Looked up every ``PEERS_SECONDS``, and True
        while unknown. A process that starts listening is seen within that time; a stream of
        it that missed a notification meanwhile is woken by that process's next poll (at most
        ``PEERS_SECONDS`` later, :meth:`poll`), as after any lost notification."""

    def subscribe(self, run_id: str, last: int | None = None) -> Subscription:
        """Set when ``run_id`` gets new events; pair with :meth:`unsubscribe`. ``last``: the
        reader has the events up to it, and keeps ``Subscription.last`` up to date; the hub's
        poll then wakes it (:meth:`poll`)."""
        waiter = Subscription(last)
        self._run_waiters[run_id].add(waiter)
        return waiter

    def publish(self, run_id: str, stored: list[tuple[int, str, str]]) -> None:
        """Hand committed events (seq, event, JSON text) of a run this process executes to its
        local streams, and remember them so their notifications are not served twice."""
        if not stored:
            return
        self._local_seq[run_id] = stored[-1][0]
        for waiter in self._run_waiters.get(run_id, ()):
            waiter.buffer.extend(stored)
            waiter.set()

    def unsubscribe(self, run_id: str, waiter: Subscription) -> None:
        waiters = self._run_waiters.get(run_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._run_waiters[run_id]

    def wake_run(self, run_id: str, seq: int | None = None) -> None:
        """A notification: ``run_id`` has new events up to ``seq`` in the table.

        The notification of an event this process published itself is skipped.
        """
        if seq is not None and seq <= self._local_seq.get(run_id, 0):
            return
        for waiter in self._run_waiters.get(run_id, ()):
            waiter.stale = True
            waiter.set()

    def executing(self, run_id: str, last_seq: int) -> None:
        """This process starts an attempt of ``run_id``, whose stored events end at
        ``last_seq``: it stores (and publishes) every later one itself."""
        self.expect_local(run_id, last_seq)

    def stored_nothing_after(self, run_id: str, seq: int) -> bool:
        """Whether ``run_id`` is executing here and has stored, or begun to store, no event
        after ``seq``. Its events after ``seq`` then all reach a subscription made now through
        :meth:`publish`, and a stream need not read the table first."""
        known = self._local_seq.get(run_id)
        return known is not None and known <= seq

    def expect_local(self, run_id: str, seq: int) -> None:
        """This process is storing event ``seq`` of ``run_id`` and will publish it itself."""
        self._local_seq[run_id] = max(seq, self._local_seq.get(run_id, 0))

    def wait_seconds(self) -> float:
        """How long a stream waits for a wake-up before it reads the table itself."""
        return FALLBACK_SECONDS if self.connected.is_set() else STREAM_POLL_SECONDS

    async def poll(self, conn: AsyncConnection[Any]) -> None:
        """Wake the subscriptions of runs not executing here whose run has events after what
        their reader has (as a notification would), or is gone: one statement for all of them.
        A notification lost (one sent while the listener reconnected, or by a process that did
        not know this one listens yet) costs at most ``PEERS_SECONDS``. Runs executing here
        need none: their events come through :meth:`publish`. If the look-up fails, every
        waiting reader is sent to the table."""
        watched = [
            run_id
            for run_id, waiters in self._run_waiters.items()
            if run_id not in self._local_seq and any(w.last is not None for w in waiters)
        ]
        if not watched:
            return
        try:
            found: dict[str, int] | None = await last_seqs(conn, watched)
        except psycopg.Error as err:
            logger.debug("could not poll for waiting streams (%s); they read themselves", err)
            found = None
        for run_id in watched:
            seq = None if found is None else found.get(run_id)
            for waiter in list(self._run_waiters.get(run_id, ())):
                if waiter.last is None:
                    continue
                if found is None:
                    waiter.stale = True
                elif seq is None:
                    waiter.gone = True
                elif seq > waiter.last:
                    waiter.stale = True
                else:
                    continue
                waiter.set()

    def forget_run(self, run_id: str) -> None:
        """The run ended here: stop remembering its sequence numbers."""
        self._local_seq.pop(run_id, None)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == EVENTS_CHANNEL:
            run_id, _, seq = payload.partition(":")
            self.wake_run(run_id, int(seq) if seq.isdigit() else None)
        elif channel == RUNS_CHANNEL:
            self.runs_changed.set()
            if payload.startswith("cancel:") and self.on_cancel:
                self.on_cancel(payload.removeprefix("cancel:"))

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="threadline-hub")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connected.wait(), timeout=10)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        delay = 0.2
        while True:
            try:
                kwargs: dict[str, Any] = {
                    **connection_kwargs(),
                    "prepare_threshold": None,
                    "application_name": LISTENER_NAME,
                }
                async with await AsyncConnection.connect(self.url, **kwargs) as conn:
                    await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    await conn.execute(f"LISTEN {RUNS_CHANNEL}")
                    self.connected.set()
                    delay = 0.2
                    # Wake everyone: anything sent while we were away is in the tables.
                    self.runs_changed.set()
                    for run_id in list(self._run_waiters):
                        self.wake_run(run_id)
                    while True:
                        self.peers = await _others_listen(conn)
                        await self.poll(conn)
                        # Notifications that arrive during the look-up wait in psycopg's backlog.
                        async for note in conn.notifies(timeout=PEERS_SECONDS):
                            self._dispatch(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                self.peers = True
                first = self.connected.is_set() or delay == 0.2
                self.connected.clear()
                if self.on_lost is not None:
                    self.on_lost(err)
                # Once per loss: an outage is logged by the database's health watch.
                (logger.info if first else logger.debug)(
                    "notification listener lost its connection (%s); retrying", err
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


async def _others_listen(conn: AsyncConnection[Any]) -> bool:
    """Whether another process's listener is connected to this database (True when the look-up
    fails: notifying is always correct, only slower; a lost connection shows in ``notifies``)."""
    try:
        found = await (await conn.execute(OTHER_LISTENERS, (LISTENER_NAME,))).fetchone()
    except psycopg.Error as err:
        logger.debug("could not look up other listeners (%s); notifying", err)
        return True
    return bool(found and found["found"])
