"""A connection of the heartbeat's own, outside the pool, opened again after a failure."""

from __future__ import annotations

import contextlib
from typing import Any

from psycopg import AsyncConnection

from api.platform.database import connection_kwargs


class LeaseConnection:
    """One long-lived connection; :meth:`get` reconnects when it was closed or lost."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: AsyncConnection[Any] | None = None

    async def get(self) -> AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = await AsyncConnection.connect(self.url, **connection_kwargs())
        return self._conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
