"""What ``/metrics`` reads of the run queue at scrape time (``api.platform.metrics``)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection


async def status_counts(conn: AsyncConnection[Any]) -> tuple[dict[str, int], float]:
    """Runs by status, and the age in seconds of the oldest pending run (0 when none).

    One scan of ``runs``; it runs only when ``/metrics`` is scraped."""
    cur = await conn.execute(
        "SELECT status, count(*) AS n,"
        " extract(epoch FROM now() - min(created_at))::float8 AS oldest"
        " FROM runs GROUP BY status"
    )
    counts: dict[str, int] = {}
    oldest = 0.0
    for row in await cur.fetchall():
        counts[str(row["status"])] = int(row["n"])
        if row["status"] == "pending":
            oldest = max(float(row["oldest"]), 0.0)
    return counts, oldest
