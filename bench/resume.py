"""Resume latency after ``kill -9``: how long a run is stalled when its server dies.

A server (``tests.utils.server.ServerProcess``, the service's default lease, heartbeat and poll
settings) starts a ``counter`` run in the background; a client follows its stream, and at the
``kill_after``-th ``tool_finished`` event (mid-step: one of two parallel calls done) the server
gets SIGKILL and is restarted at once on the same port. Measured, per repetition:

- **restart → /ok**: from starting the new process until ``GET /ok`` answers (process start,
  imports, pool, migrations check, the orphan sweep, the workers);
- **kill → resumed**: from the kill until the run's first event of attempt 2 (its ``metadata``)
  is stored — the restarted server swept the dead process's run and claimed it again;
- **kill → end**: from the kill until the run's ``end`` event is stored.

The event times are ``run_events.created_at`` (the database's clock, same machine), so a
client's reconnect delay is not counted. Each repetition also checks the run ended ``success``
with ``counter.txt`` holding each line once.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg

from tests.utils.server import ServerProcess
from tests.utils.sse import read_sse
from tests.utils.workspace import counter_lines


class ModuleServer(ServerProcess):
    """A ``ServerProcess`` started as ``python -m <module> serve``."""

    def __init__(self, *args: Any, module: str = "cli", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.module = module

    @property
    def command(self) -> list[str]:
        cmd = super().command
        return [*cmd[:2], self.module, *cmd[3:]]


async def _kill_mid_run(
    server: ServerProcess, *, n: int, delay: float, kill_after: int
) -> tuple[str, str, float]:
    """Start a run, follow it until the ``kill_after``-th tool finished, SIGKILL the server."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as client:
        created = await client.post("/threads", json={})
        created.raise_for_status()
        tid = created.json()["thread_id"]
        body = {
            "assistant_id": "agent",
            "input": {"task": {"name": "counter", "params": {"n": n, "delay": delay}}},
            "stream_mode": ["updates", "custom"],
        }
        response = await client.post(f"/threads/{tid}/runs", json=body)
        response.raise_for_status()
        rid = response.json()["run_id"]
        finished = 0
        async with client.stream(
            "GET", f"/threads/{tid}/runs/{rid}/stream", headers={"Last-Event-ID": "-1"}
        ) as stream:
            async for frame in read_sse(stream):
                if frame.event == "end":
                    raise RuntimeError("the run ended before the kill point")
                if (
                    frame.event == "custom"
                    and isinstance(frame.data, dict)
                    and frame.data.get("type") == "tool_finished"
                ):
                    finished += 1
                    if finished >= kill_after:
                        break
    killed_at = time.time()
    server.kill()
    return tid, rid, killed_at


def _event_times(url: str, run_id: str, thread_id: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        delta = conn.execute(
            # How LangGraph's own prune tells a thread that uses a DeltaChannel.
            "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = %s"
            " AND metadata ? 'counters_since_delta_snapshot')",
            (thread_id,),
        ).fetchone()
        row = conn.execute(
            "SELECT extract(epoch FROM min(created_at) FILTER (WHERE attempt = 2)) AS resumed,"
            " extract(epoch FROM max(created_at) FILTER (WHERE event = 'end')) AS ended,"
            " max(attempt) AS attempts,"
            " (SELECT data::text FROM run_events WHERE run_id = %(r)s AND event = 'end') AS end_"
            " FROM run_events WHERE run_id = %(r)s",
            {"r": uuid.UUID(run_id)},
        ).fetchone()
    assert row is not None
    resumed, ended, attempts, end = row
    return {
        "resumed": float(resumed) if resumed is not None else None,
        "ended": float(ended) if ended is not None else None,
        "attempts": attempts,
        "status": json.loads(end).get("status") if end else None,
        "delta_channel": bool(delta and delta[0]),
    }


async def _wait_end(server: ServerProcess, tid: str, rid: str, timeout: float) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=timeout) as client:
        response = await client.get(f"/threads/{tid}/runs/{rid}/join")
        response.raise_for_status()


async def run(
    url: str,
    data_dir: Path,
    log_path: Path,
    *,
    repeats: int = 5,
    n: int = 6,
    delay: float = 0.3,
    kill_after: int = 2,
    timeout: float = 120.0,
    module: str = "cli",
) -> dict[str, Any]:
    """``repeats`` kill/restart cycles on one server (see the module docstring)."""
    samples: list[dict[str, Any]] = []
    server = ModuleServer(
        url,
        data_dir,
        # The service's defaults: a restart on the same host sweeps the dead process's runs at
        # once, so the lease length does not decide the resume time here.
        lease_seconds=10.0,
        heartbeat_seconds=2.0,
        poll_seconds=1.0,
        env={"THREADLINE_LOG_LEVEL": "warning"},
        log_path=log_path,
        name="resume",
        startup_timeout=90.0,
        module=module,
    )
    with server:
        for _ in range(repeats):
            tid, rid, killed = await _kill_mid_run(server, n=n, delay=delay, kill_after=kill_after)
            t0 = time.perf_counter()
            await asyncio.to_thread(server.start)
            restart = time.perf_counter() - t0
            await asyncio.wait_for(_wait_end(server, tid, rid, timeout), timeout)
            times = await asyncio.to_thread(_event_times, url, rid, tid)
            lines = counter_lines(data_dir, tid)
            # Parallel calls may append in either order; each line exactly once is the contract.
            counter_ok = sorted(lines) == sorted(str(i) for i in range(1, n + 1))
            samples.append(
                {
                    "restart_to_ok_s": round(restart, 3),
                    "kill_to_resumed_s": round(times["resumed"] - killed, 3)
                    if times["resumed"]
                    else None,
                    "kill_to_end_s": round(times["ended"] - killed, 3) if times["ended"] else None,
                    "attempts": times["attempts"],
                    "status": times["status"],
                    "counter_ok": counter_ok,
                    "delta_channel": times["delta_channel"],
                    **({} if counter_ok else {"counter_lines": lines}),
                }
            )

    def stat(key: str) -> dict[str, float | None]:
        xs = [s[key] for s in samples if s[key] is not None]
        return {
            "median": round(statistics.median(xs), 3) if xs else None,
            "max": round(max(xs), 3) if xs else None,
        }

    return {
        "module": module,
        "repeats": repeats,
        "n": n,
        "delay": delay,
        "kill_after_tool_finished": kill_after,
        "restart_to_ok_s": stat("restart_to_ok_s"),
        "kill_to_resumed_s": stat("kill_to_resumed_s"),
        "kill_to_end_s": stat("kill_to_end_s"),
        "delta_channel": any(s["delta_channel"] for s in samples),
        "all_ok": all(
            s["status"] == "success" and s["counter_ok"] and s["attempts"] == 2 for s in samples
        ),
        "samples": samples,
    }
