"""Whether PostgreSQL answers: faults told from errors, an outage watched until it ends.

A lost connection, an administrator's or a crash's shutdown, a server still starting, a pool
that hands out nothing, a server that became a read-only standby: none of these is a run's own
error. :func:`is_database_fault` tells them from the others. :class:`DatabaseHealth` is told of
each one it sees (:meth:`DatabaseHealth.fault`), asks the server itself with a connection of its
own, and only when that fails too counts an outage: one log line when it starts, one when it
ends, requests answered ``503`` meanwhile (``api.platform.errors``), runs handed back once it
answers (``api.engine.worker``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import psycopg
from psycopg import AsyncConnection

logger = logging.getLogger(__name__)

PROBE_SECONDS = 2.0
"""How long a probe waits for the server to answer before it counts as unreachable."""
PROBE_INTERVAL = 0.5
"""Between two probes while the server is unreachable."""
RETRY_AFTER_SECONDS = 2
"""What a ``503`` tells a client to wait before it tries again (``Retry-After``)."""

FAULT_STATES = frozenset(
    {
        "57P01",  # admin_shutdown: the server is stopping (pg_ctl stop, restart)
        "57P02",  # crash_shutdown: another backend crashed, the server restarts
        "57P03",  # cannot_connect_now: starting up, in recovery
        "25006",  # read_only_sql_transaction: a standby (a failover is in progress)
    }
)
"""SQLSTATEs that say the server is going away, coming back, or not the primary."""


class DatabaseUnavailable(Exception):
    """The database does not answer now; try again in a few seconds."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"The database is unreachable ({why}); the request was not carried out. "
            f"Retry in {RETRY_AFTER_SECONDS} s: runs in flight continue from their last "
            "checkpoint when it answers."
        )
        self.why = why


def _chain(err: BaseException) -> Iterator[BaseException]:
    """``err``, what caused it, what it was raised in, and what a group holds: all of them."""
    seen: set[int] = set()
    todo = [err]
    while todo:
        e = todo.pop()
        if id(e) in seen or len(seen) > 50:
            continue
        seen.add(id(e))
        yield e
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)


def _is_fault(e: BaseException) -> bool:
    if isinstance(e, DatabaseUnavailable):
        return True
    if isinstance(e, psycopg.OperationalError):
        # No SQLSTATE: the client's side (connection refused, lost, closed, a pool timeout);
        # class 08: connection exceptions.
        state = e.sqlstate
        return state is None or state.startswith("08") or state in FAULT_STATES
    if isinstance(e, psycopg.Error):
        return e.sqlstate in FAULT_STATES
    return False


def is_database_fault(err: BaseException) -> bool:
    """Whether ``err``, or anything in its chain, says the database went away (not that a
    statement was wrong): the run's or request's work is intact and can go on later."""
    return any(_is_fault(e) for e in _chain(err))


def describe(err: BaseException) -> str:
    """The database fault in ``err``'s chain, in a few words."""
    for e in _chain(err):
        if _is_fault(e):
            if isinstance(e, DatabaseUnavailable):
                return e.why
            text = str(e).strip().splitlines()[0] if str(e).strip() else ""
            return f"{type(e).__name__}: {text}" if text else type(e).__name__
    return type(err).__name__


def log_failure(
    log: logging.Logger, health: DatabaseHealth, err: BaseException, what: str, *args: object
) -> None:
    """Log a background loop's failure: with its traceback, unless the database went away
    (the health watch logs the outage once; a line per loop pass would repeat it)."""
    if is_database_fault(err):
        health.fault(err)
        log.debug(what + " (%s)", *args, describe(err))
    else:
        log.error(what, *args, exc_info=err)


class QuietDuringOutage(logging.Filter):
    """Drops psycopg_pool's warnings while an outage is known (its failed reconnections, the
    broken connections it discards): the health watch has logged the outage once."""

    def __init__(self, health: DatabaseHealth) -> None:
        super().__init__()
        self.health = health

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING or not (
            self.health.down or time.monotonic() - self.health.faulted_at < PROBE_SECONDS
        )


class DatabaseHealth:
    """The database's state as this process sees it (one per pool)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.down_since: float | None = None
        """``time.monotonic()`` when the current outage began; None while it answers."""
        self.why = ""
        """What the outage's first fault said."""
        self.faulted_at = 0.0
        """``time.monotonic()`` of the last fault seen: connections idle since before it are
        checked before use (``api.platform.database``)."""
        self.outages = 0
        self._watch: asyncio.Task[None] | None = None
        self._answered = asyncio.Event()
        self._answered.set()
        self._decided = asyncio.Event()
        """Set once the watch's first probe told whether the server answers."""
        self._last_probe = (0.0, True)

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def fault(self, err: BaseException) -> None:
        """A database fault was seen: find out whether the server answers, and if it does not,
        watch it until it does."""
        self.faulted_at = time.monotonic()
        if self._watch is None or self._watch.done():
            self._watch = asyncio.create_task(self._watch_outage(err), name="threadline-db-health")

    async def suspect(self) -> bool:
        """Whether the database is down: known, or found by a probe now (one at a time, and
        none within ``PROBE_INTERVAL`` of the last)."""
        if self.down:
            return True
        at, answered = self._last_probe
        if time.monotonic() - at < PROBE_INTERVAL:
            return not answered
        if self._watch is None or self._watch.done():
            self._watch = asyncio.create_task(self._watch_outage(None), name="threadline-db-health")
        await self._first_probe(self._watch)
        return self.down

    async def wait_up(self, timeout: float | None = None) -> bool:
        """Wait until the database answers (at once when it does); False after ``timeout``."""
        if self._watch is not None and not self._watch.done() and not self.down:
            await self._first_probe(self._watch)  # a probe in flight decides
        if not self.down:
            return True
        try:
            await asyncio.wait_for(self._answered.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def probe(self) -> bool:
        """Whether the primary answers a new connection within ``PROBE_SECONDS`` (a standby,
        read-only, does not count)."""
        try:
            async with asyncio.timeout(PROBE_SECONDS):
                conn = await AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=max(2, int(PROBE_SECONDS))
                )
                async with conn:
                    cur = await conn.execute("SELECT pg_is_in_recovery()")
                    row = await cur.fetchone()
                    answered = row is not None and not row[0]
        except (OSError, TimeoutError, psycopg.Error):
            answered = False
        self._last_probe = (time.monotonic(), answered)
        return answered

    async def _first_probe(self, watch: asyncio.Task[None]) -> None:
        """Return once ``watch`` knows whether the server answers (its first probe)."""
        decided = asyncio.ensure_future(self._decided.wait())
        try:
            await asyncio.wait(
                [watch, decided], timeout=PROBE_SECONDS + 1, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            decided.cancel()

    async def _watch_outage(self, err: BaseException | None) -> None:
        self._decided.clear()
        if await self.probe():
            self._decided.set()
            return  # one connection was lost, or the pool was busy: the server answers
        self.down_since = time.monotonic()
        self.why = describe(err) if err is not None else "it does not answer"
        self.outages += 1
        self._answered.clear()
        self._decided.set()
        logger.warning(
            "database unreachable (%s): requests get 503 with Retry-After, runs continue from"
            " their last checkpoint when it answers",
            self.why,
        )
        try:
            while True:
                await asyncio.sleep(PROBE_INTERVAL)
                if await self.probe():
                    break
        except asyncio.CancelledError:  # the process is stopping
            self.down_since = None
            self._answered.set()
            raise
        lasted = time.monotonic() - self.down_since
        self.faulted_at = time.monotonic()  # every connection from before is checked at its use
        self.down_since = None
        self._answered.set()
        logger.warning("database reachable again after %.1f s", lasted)

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)


class Suspicion:
    """Asks whether the database answers for a caller that waits too long for a connection,
    and stops the wait if it does not (``api.platform.database.RecentFirstPool.getconn``)."""

    def __init__(self, health: DatabaseHealth) -> None:
        self.health = health
        self.caller = asyncio.current_task()
        self.probe: asyncio.Task[None] | None = None
        self.fired = False
        self.over = False

    def start(self) -> None:
        self.probe = asyncio.create_task(self._ask(), name="threadline-pool-suspicion")

    async def _ask(self) -> None:
        if await self.health.suspect() and not self.over and self.caller is not None:
            self.fired = True
            self.caller.cancel()

    def stopped_us(self) -> bool:
        """Whether the cancellation the caller got is this one's (and no other is pending)."""
        return self.fired and self.caller is not None and self.caller.uncancel() == 0

    def end(self) -> None:
        self.over = True
        if self.probe is not None and not self.probe.done():
            self.probe.cancel()
