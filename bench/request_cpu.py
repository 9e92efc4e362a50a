"""CPU time of one timed item of ``bench.request_floor``, read around it (outside its clock):
this process (the client, and the floor's graph), the server that answered, and the PostgreSQL
backends of the database it used.

The server's and the backends' times come from ``/proc`` through ``psutil`` in clock ticks
(10 ms), so one item's reading is coarse: means over many rounds are what to read. A backend
that is not readable (another user's process, where that is not allowed) counts 0 and is
reported in ``errors``."""

from __future__ import annotations

import time
from typing import Any

import psutil
import psycopg


class CpuMeter:
    """``read(server, database)`` -> seconds of CPU so far: ``client``, ``server``, ``pg``."""

    def __init__(self, admin_url: str, servers: dict[str, int], databases: dict[str, str]) -> None:
        self.admin_url = admin_url
        self.servers = {k: psutil.Process(pid) for k, pid in servers.items()}
        self.databases = databases
        self.backends: dict[str, list[psutil.Process]] = {k: [] for k in databases}
        self.errors = 0

    def refresh(self) -> None:
        """List each database's backends again (pools open and close connections)."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for key, name in self.databases.items():
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)
                ).fetchall()
                known = {p.pid: p for p in self.backends[key]}
                self.backends[key] = [known.get(pid) or psutil.Process(pid) for (pid,) in rows]

    @staticmethod
    def _cpu(proc: psutil.Process) -> float:
        t = proc.cpu_times()
        return float(t.user + t.system)

    def read(self, server: str | None, database: str | None) -> dict[str, float]:
        out = {"client": time.process_time(), "server": 0.0, "pg": 0.0}
        if server is not None:
            out["server"] = self._cpu(self.servers[server])
        for proc in self.backends.get(database or "", []):
            try:
                out[f"pg:{proc.pid}"] = self._cpu(proc)
            except psutil.Error:
                self.errors += 1
        return out


def spent(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """CPU seconds between two readings; a backend seen only after counts from 0 (it started
    during the item), one seen only before is left out (it exited: its last ticks are lost)."""
    pg = sum(v - before.get(k, 0.0) for k, v in after.items() if k.startswith("pg:"))
    return {
        "client": after["client"] - before["client"],
        "server": after["server"] - before["server"],
        "pg": pg,
    }


def summary(samples: list[dict[str, float]]) -> dict[str, Any]:
    """Mean ms of CPU per item, by process and in all."""
    n = len(samples) or 1
    out = {k: round(1000 * sum(s[k] for s in samples) / n, 3) for k in ("client", "server", "pg")}
    out["all"] = round(sum(out.values()), 3)
    return out
