"""The process's connection pool: psycopg's, handing out the connection returned last, and
knowing whether the database answers (:mod:`api.platform.db_health`).

Statements are prepared, and PostgreSQL plans them, per connection: taken in turn, 20
connections each saw a twentieth of the statements, so a statement run once per run was mostly
among a connection's first five executions (planned anew at every bind) for the first hundred
runs, and parsed on each connection in turn. Taken most recent first, the few connections a
light load needs stay warm; under load every connection is in use either way.

psycopg's pool hands out the connection idle longest and offers no other order, so the pool
keeps the connections callers return in a stack of its own (:class:`Recent`) and hands them out
from its top, through psycopg's public ``getconn``/``putconn`` only. psycopg's pool proper holds
the rest: a connection returned while a caller waits in psycopg's queue goes to that caller (in
the queue's order), and one idle in the stack longer than ``IDLE_CHECK_SECONDS``, returned
before the last database fault, past ``max_lifetime`` or not idle goes back to psycopg, which
checks it before its next use (or closes it), and shrinks the pool from those idle longest.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any
from weakref import WeakKeyDictionary

from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from api.platform.db_health import DatabaseHealth, DatabaseUnavailable, Suspicion

Conn = AsyncConnection[DictRow]

IDLE_CHECK_SECONDS = 30.0
"""A connection idle for longer is checked before use (a restarted server may have closed it)."""
SUSPECT_SECONDS = 2.0
"""A caller that waited this long for a connection asks whether the database answers at all
(``api.platform.db_health``): if not, it gets :class:`DatabaseUnavailable` now rather than a pool
timeout after ``POOL_TIMEOUT_SECONDS``; if it does (the pool is busy), it waits on."""
POOL_TIMEOUT_SECONDS = 30.0


class Recent:
    """The connections callers returned and no one took since, the last returned on top; when
    each connection came back, and when the pool first handed it out. Weak: a connection
    psycopg closes is forgotten with it."""

    def __init__(self, health: DatabaseHealth) -> None:
        self.health = health
        self.stack: deque[Conn] = deque()
        self.returned: WeakKeyDictionary[Conn, float] = WeakKeyDictionary()
        self.first_out: WeakKeyDictionary[Conn, float] = WeakKeyDictionary()
        self.served = 0
        """Connections handed out from the stack (psycopg counts the others)."""

    def fresh(self, conn: Conn, now: float) -> bool:
        """Known good: returned within ``IDLE_CHECK_SECONDS``, after the last database fault."""
        returned = self.returned.get(conn)
        return (
            returned is not None
            and now - returned <= IDLE_CHECK_SECONDS
            and returned > self.health.faulted_at
        )

    async def check(self, conn: Conn) -> None:
        """psycopg's check of a connection it hands out. Checking every checkout costs a round
        trip each (a third of the service's statements); a connection in steady use is known
        good, and a broken one is discarded when it fails. One returned before the last
        database fault was seen may have died with the server: checked, and discarded (psycopg
        hands out another) if it did."""
        if not self.fresh(conn, time.monotonic()):
            await conn.execute("SELECT 1", prepare=False)

    def counted(self, stats: dict[str, int]) -> dict[str, int]:
        """psycopg's statistics with the stack's connections and hand-outs in them."""
        stats["pool_available"] = stats.get("pool_available", 0) + len(self.stack)
        if self.served:
            stats["requests_num"] = stats.get("requests_num", 0) + self.served
        return stats


class RecentFirstPool(AsyncConnectionPool[Conn]):
    """A pool that hands out the connection returned last (see the module's docstring).

    It also knows whether the database answers (:attr:`health`): while it does not, a caller
    gets :class:`DatabaseUnavailable` at once, and one that waited ``SUSPECT_SECONDS`` for a
    connection finds out whether it ever will."""

    def __init__(self, conninfo: str, *, health: DatabaseHealth, **options: Any) -> None:
        self.health = health
        self.recent = Recent(health)
        self.asking = 0
        """Callers inside psycopg's ``getconn`` (some of them perhaps in its queue)."""
        super().__init__(conninfo, check=self.recent.check, **options)

    async def getconn(self, timeout: float | None = None) -> Conn:
        health = self.health
        if health.down:
            raise DatabaseUnavailable(health.why)
        recent = self.recent
        if recent.stack and recent.fresh(recent.stack[-1], time.monotonic()):
            recent.served += 1
            return recent.stack.pop()
        # The top is stale, so is every one below it: psycopg checks them before their use.
        await self.give_back(stale_only=True)
        # A caller still waiting after SUSPECT_SECONDS has the server asked, and is stopped
        # (cancelled, then told DatabaseUnavailable) if it does not answer. It keeps its place
        # in the pool's queue meanwhile: under load, waiters are served in order.
        suspicion = Suspicion(health)
        timer = asyncio.get_running_loop().call_later(SUSPECT_SECONDS, suspicion.start)
        self.asking += 1
        try:
            conn = await super().getconn(timeout)
        except asyncio.CancelledError:
            if suspicion.stopped_us():
                raise DatabaseUnavailable(health.why) from None
            raise
        finally:
            self.asking -= 1
            timer.cancel()
            suspicion.end()
        recent.first_out.setdefault(conn, time.monotonic())
        return conn

    async def putconn(self, conn: Conn) -> None:
        # Stamped here rather than in a ``reset`` callback: with one, psycopg returns every
        # connection through a worker, and it is not back yet when the caller asks for the next.
        now = time.monotonic()
        recent = self.recent
        recent.returned[conn] = now
        if self.asking or self.closed or not self.reusable(conn, now):
            # Shielded: a caller cancelled meanwhile does not leave it out of the pool.
            await asyncio.shield(super().putconn(conn))
            return
        recent.stack.append(conn)
        if not recent.fresh(recent.stack[0], now):
            await self.give_back(stale_only=True)

    def reusable(self, conn: Conn, now: float) -> bool:
        """Idle, open, and younger than ``max_lifetime`` (psycopg's expiry is never later)."""
        if conn.info.transaction_status != TransactionStatus.IDLE:
            return False
        return now - self.recent.first_out.get(conn, now) < self.max_lifetime

    async def give_back(self, *, stale_only: bool) -> None:
        """Return the connections at the bottom of the stack to psycopg's pool: those no longer
        fresh, or all. One at a time, the stack read anew after each (others take and return
        connections meanwhile)."""
        recent = self.recent
        stack = recent.stack
        while stack and not (stale_only and recent.fresh(stack[0], time.monotonic())):
            await asyncio.shield(super().putconn(stack.popleft()))

    async def close(self, timeout: float = 5.0) -> None:
        await self.give_back(stale_only=False)  # psycopg closes those it holds
        await super().close(timeout)
        await self.give_back(stale_only=False)  # returned meanwhile: psycopg closes them now

    def get_stats(self) -> dict[str, int]:
        return self.recent.counted(super().get_stats())

    def pop_stats(self) -> dict[str, int]:
        stats = self.recent.counted(super().pop_stats())
        self.recent.served = 0
        return stats
