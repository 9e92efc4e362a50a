"""Soak: concurrent ``counter`` runs against one or two servers, SIGKILLed at random moments.

    python -m eval.soak --kills 100 --concurrency 4 --servers 2

On a fresh database (``soak_<uuid>`` created on the ``--database-url`` admin URL, dropped at the
end) and a temporary data directory, it keeps ``--concurrency`` counter runs in flight (random
``n`` and ``delay``), each followed by a client that reads the whole stream and reconnects with
``Last-Event-ID`` to whichever server is up. At random intervals (``--kill-every MIN MAX``
seconds) it SIGKILLs a server that holds a running run (the tools it started live on, as after a
real ``kill -9``) and restarts it at once in the background; a server is killed only after it
has been up for a random MIN..MAX seconds itself, so a restart (a few seconds on a busy machine)
does not end in a kill before the server did anything. Once ``--kills`` kills happened it starts
no new run, waits for the runs in flight to end, and reports:

- runs started / finished / ended verified, and every run that broke the contract;
- duplicated and missing ``counter.txt`` lines (target 0);
- events lost or duplicated per run, as the reconnecting client saw them against what the
  server stored (target 0);
- the distribution of attempts per run, appends re-run and skipped by the idempotency ledger;
- time from a kill to resumed progress: the first event of an interrupted run, newer than what it
  had stored at the kill, reaching the client (median, p90, max).

The JSON report goes to ``eval/results/soak-<timestamp>.json``; a markdown summary is printed.
The exit code is 1 when any run broke the contract. The servers run with the default settings,
attempts limit included: a run ends in error only after ``THREADLINE_MAX_ATTEMPTS`` attempts in
a row that saved nothing, and a kill is held back while a server holds a run whose previous
attempt already saved nothing and whose current one has not saved anything yet
(:func:`eval.harness.stalling_again`), so a run is never stalled twice in a row by the soak.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from eval.database import create_database, drop_database
from eval.harness import (
    STREAM_MODES,
    Outcome,
    ServerProcess,
    ServerStartError,
    SSEEvent,
    StreamFollower,
    api_headers,
    counter_lines,
    kill_strays,
    stalling_again,
    workspace_path,
)

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
RESULTS = Path(__file__).parent / "results"


@dataclass
class SoakOptions:
    kills: int = 100
    concurrency: int = 4
    servers: int = 2
    database_url: str = DEFAULT_ADMIN_URL
    """An admin URL: the soak creates (and drops) its own database on that server."""
    n_min: int = 4
    n_max: int = 8
    delay_min: float = 0.1
    delay_max: float = 0.3
    kill_min: float = 1.0
    kill_max: float = 3.0
    lease_seconds: float = 2.0
    heartbeat_seconds: float = 0.4
    poll_seconds: float = 0.2
    seed: int | None = None
    drain_timeout: float = 240.0
    """After the last kill, how long the runs in flight get to end."""
    run_timeout: float = 900.0
    max_seconds: float = 1800.0
    """Give up (an error, not a report) when the kills take longer than this."""
    results_dir: Path | None = RESULTS
    """Where the JSON report goes; None writes none."""
    keep: bool = False
    """Keep the data directory and the database (for a post-mortem)."""
    verbose: bool = True


# -- database ---------------------------------------------------------------------------------


def _pid(worker_id: str | None) -> int | None:
    try:
        return int(str(worker_id).split("/")[1])
    except (IndexError, ValueError):
        return None


# -- what a client sees -------------------------------------------------------------------------


@dataclass
class TimedFollower(StreamFollower):
    """A :class:`StreamFollower` that also notes when each event arrived."""

    times: list[float] = field(default_factory=list)

    def _take(self, frame: SSEEvent) -> None:
        if not frame.is_comment:
            self.times.append(time.monotonic())
        super()._take(frame)

    def first_after(self, seq: int, since: float) -> float | None:
        """Seconds from ``since`` to the first event with an id above ``seq``."""
        for ev, at in zip(self.events, self.times, strict=True):
            if ev.seq is not None and ev.seq > seq:
                return at - since
        return None


@dataclass
class SoakRun:
    thread_id: str
    run_id: str
    n: int
    delay: float
    started: float
    follower: TimedFollower
    ended_at: float | None = None
    result: dict[str, Any] = field(default_factory=dict)


@dataclass
class Interruption:
    run_id: str
    attempt: int
    seq: int
    """The run's last stored event id right after the kill."""
    resumed_after: float | None = None
    """Seconds from the kill to the client reading the run's next event."""


@dataclass
class Kill:
    index: int
    at: float
    server: str
    pid: int
    interrupted: list[Interruption]
    restart_seconds: float | None = None


# -- the soak --------------------------------------------------------------------------------


class Soak:
    def __init__(self, options: SoakOptions, database_url: str, data_dir: Path) -> None:
        self.o = options
        self.database_url = database_url
        self.data_dir = data_dir
        self.rng = random.Random(options.seed)
        env = {"THREADLINE_LOG_LEVEL": "warning"}
        self.servers = [
            ServerProcess(
                database_url,
                data_dir,
                lease_seconds=options.lease_seconds,
                heartbeat_seconds=options.heartbeat_seconds,
                poll_seconds=options.poll_seconds,
                env=env,
                name=f"s{i}",
            )
            for i in range(options.servers)
        ]
        self.ready: dict[str, bool] = {s.name: False for s in self.servers}
        self.killable_at: dict[str, float] = {s.name: 0.0 for s in self.servers}
        """A server is killed only after it ran a random 1-3 s (the kill interval) since its
        start: one killed again the moment it is back would just keep the service down."""
        self.runs: list[SoakRun] = []
        self.kills: list[Kill] = []
        self.restart_failures = 0
        self.client_errors: list[str] = []
        self.t0 = time.monotonic()
        self._restarts: set[asyncio.Task[None]] = set()
        self.fatal: BaseException | None = None

    def log(self, message: str) -> None:
        if self.o.verbose:
            print(f"[soak {time.monotonic() - self.t0:6.1f}s] {message}", file=sys.stderr)

    # -- servers -----------------------------------------------------------------------------

    async def start_servers(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in self.servers))
        for s in self.servers:
            self.came_up(s)

    def came_up(self, server: ServerProcess) -> None:
        self.ready[server.name] = True
        self.killable_at[server.name] = time.monotonic() + self.rng.uniform(
            self.o.kill_min, self.o.kill_max
        )

    async def _restart(self, server: ServerProcess, kill: Kill) -> None:
        started = time.monotonic()
        for _ in range(5):
            try:
                await asyncio.to_thread(server.start)
                break
            except ServerStartError as err:
                self.restart_failures += 1
                self.log(f"restart of {server.name} failed, retrying: {str(err)[:200]}")
                await asyncio.sleep(0.5)
        else:
            raise RuntimeError(f"{server.name} did not come back up:\n{server.log_tail()}")
        kill.restart_seconds = round(time.monotonic() - started, 3)
        self.came_up(server)

    def stop_servers(self) -> None:
        for s in self.servers:
            s.stop()

    def up(self) -> list[ServerProcess]:
        return [s for s in self.servers if self.ready[s.name] and s.running]

    # -- HTTP with failover ------------------------------------------------------------------

    async def request(
        self, http: httpx.AsyncClient, method: str, path: str, body: Any = None
    ) -> httpx.Response:
        """Send to any server that is up; on a connection error try again (60 s at most)."""
        deadline = time.monotonic() + 60
        while True:
            up = self.up()
            for server in self.rng.sample(up, len(up)):
                try:
                    return await http.request(method, server.url + path, json=body)
                except httpx.TransportError:
                    continue
            if time.monotonic() > deadline:
                raise RuntimeError(f"{method} {path}: no server answered for 60 s")
            await asyncio.sleep(0.1)

    async def create_run(self, http: httpx.AsyncClient, n: int, delay: float) -> tuple[str, str]:
        tid = str(uuid.uuid4())
        created = await self.request(
            http,
            "POST",
            "/threads",
            {"thread_id": tid, "if_exists": "do_nothing", "metadata": {"soak": True}},
        )
        created.raise_for_status()
        body = {
            "assistant_id": "agent",
            "input": {"task": {"name": "counter", "params": {"n": n, "delay": delay}}},
            "stream_mode": list(STREAM_MODES),
        }
        response = await self.request(http, "POST", f"/threads/{tid}/runs", body)
        if response.status_code == 200:
            return tid, str(response.json()["run_id"])
        if response.status_code == 409:
            # A first try of this POST created the run, then its server died before answering.
            listed = await self.request(http, "GET", f"/threads/{tid}/runs")
            return tid, str(listed.json()[0]["run_id"])
        raise RuntimeError(f"creating a run answered {response.status_code}: {response.text}")

    # -- one run -----------------------------------------------------------------------------

    async def drive(self, http: httpx.AsyncClient) -> None:
        n = self.rng.randint(self.o.n_min, self.o.n_max)
        delay = round(self.rng.uniform(self.o.delay_min, self.o.delay_max), 3)
        started = time.monotonic()
        tid, rid = await self.create_run(http, n, delay)
        run = SoakRun(tid, rid, n, delay, started, TimedFollower(tid, rid))
        self.runs.append(run)
        deadline = started + self.o.run_timeout
        while not run.follower.ended:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                await run.follower.follow(self.servers, timeout=left)
            except TimeoutError:
                break
            except AssertionError as err:  # a non-200 answer: note it, keep following
                self.client_errors.append(f"{rid}: {err}")
                await asyncio.sleep(0.2)
        run.ended_at = time.monotonic()
        run.result = await self.check(http, run)
        problems = run.result["problems"]
        self.log(
            f"run {rid[:8]} n={n}: {run.result['status']}, attempts {run.result['attempts']}, "
            f"{len(run.follower.events)} events" + (f" PROBLEMS {problems}" if problems else "")
        )

    async def check(self, http: httpx.AsyncClient, run: SoakRun) -> dict[str, Any]:
        """What the client saw against what the server stored and the workspace holds."""
        tid, rid = run.thread_id, run.run_id
        got = (await self.request(http, "GET", f"/threads/{tid}/runs/{rid}")).json()
        thread = (await self.request(http, "GET", f"/threads/{tid}")).json()
        async with await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, row_factory=dict_row
        ) as conn:
            cur = await conn.execute(
                "SELECT count(*) AS count, coalesce(max(seq), 0) AS max FROM run_events"
                " WHERE run_id = %s",
                (uuid.UUID(rid),),
            )
            stored = await cur.fetchone()
        assert stored is not None
        ids = [e.seq for e in run.follower.events if e.seq is not None]
        lost = len(set(range(1, int(stored["max"]) + 1)) - set(ids))
        duplicated_events = len(ids) - len(set(ids))
        lines = counter_lines(self.data_dir, tid)
        counts = Counter(lines)
        duplicated_lines = sum(c - 1 for c in counts.values() if c > 1)
        missing_lines = sum(1 for i in range(1, run.n + 1) if str(i) not in counts)
        outcome = Outcome(
            thread_id=tid,
            run_id=rid,
            status=got.get("status"),
            run=got,
            thread=thread,
            events=run.follower.events,
            counter=lines,
            kills=[],
            connections=run.follower.connections,
            elapsed=round((run.ended_at or time.monotonic()) - run.started, 3),
            error=None if run.follower.ended else "no 'end' event within the run timeout",
        )
        problems = outcome.problems(counter_n=run.n)
        missing_results, repeated_results = result_updates(run.follower.events)
        if missing_results or repeated_results:
            problems.append(
                f"tool results never sent: {missing_results}; sent more often than the call "
                f"ran: {repeated_results}"
            )
        values = thread.get("values") or {}
        if values.get("status") != "verified":
            problems.append(f"thread values status {values.get('status')!r}, not 'verified'")
        if int(stored["count"]) != int(stored["max"]):
            problems.append(f"stored event ids not contiguous: {stored}")
        return {
            "thread_id": tid,
            "run_id": rid,
            "n": run.n,
            "delay": run.delay,
            "status": got.get("status"),
            "verified": values.get("status") == "verified",
            "ended": run.follower.ended,
            "attempts": got.get("attempt"),
            "metadata_attempts": outcome.attempts,
            "events_stored": int(stored["count"]),
            "events_read": len(ids),
            "events_lost": lost,
            "events_duplicated": duplicated_events,
            "connections": run.follower.connections,
            "duplicated_lines": duplicated_lines,
            "missing_lines": missing_lines,
            "tool_results_missing": len(missing_results),
            "tool_results_repeated": len(repeated_results),
            "skipped_appends": self.skipped(tid),
            "elapsed": outcome.elapsed,
            "problems": problems,
        }

    def skipped(self, thread_id: str) -> int:
        try:
            log = workspace_path(self.data_dir, thread_id, ".counter-attempts").read_text()
        except FileNotFoundError:
            return 0
        return sum(1 for line in log.splitlines() if " skipped " in line)

    # -- kills -------------------------------------------------------------------------------

    async def holders(self, conn: psycopg.AsyncConnection[Any]) -> dict[int, list[dict[str, Any]]]:
        """pid → running runs it holds."""
        cur = await conn.execute(
            "SELECT run_id, attempt, worker_id FROM runs WHERE status = 'running'"
        )
        out: dict[int, list[dict[str, Any]]] = {}
        for row in await cur.fetchall():
            pid = _pid(row["worker_id"])
            if pid is not None:
                out.setdefault(pid, []).append(row)
        return out

    async def killer(self) -> None:
        async with await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, row_factory=dict_row
        ) as conn:
            while len(self.kills) < self.o.kills:
                await asyncio.sleep(self.rng.uniform(self.o.kill_min, self.o.kill_max))
                while True:
                    self.check_health()
                    held = await self.holders(conn)
                    # Not a server whose kill would stall one of its runs twice in a row.
                    spared = {_pid(w) for w in (await stalling_again(conn)).values()}
                    now = time.monotonic()
                    candidates = [
                        s
                        for s in self.up()
                        if held.get(s.pid or -1)
                        and s.pid not in spared
                        and now >= self.killable_at[s.name]
                    ]
                    if candidates:
                        break
                    await asyncio.sleep(0.05)  # nothing to interrupt right now
                victim = self.rng.choice(candidates)
                pid = victim.pid
                assert pid is not None
                self.ready[victim.name] = False
                victim.kill()
                at = time.monotonic()
                # What the kill cut short, read after it (a run may have ended just before it):
                # nobody else holds these runs until their leases expire, seconds from now.
                cur = await conn.execute(
                    "SELECT r.run_id, r.attempt, (SELECT coalesce(max(e.seq), 0) FROM run_events e"
                    "   WHERE e.run_id = r.run_id) AS seq"
                    " FROM runs r WHERE r.status = 'running' AND r.worker_id LIKE %s",
                    (f"%/{pid}/%",),
                )
                running = await cur.fetchall()
                kill = Kill(
                    index=len(self.kills) + 1,
                    at=at,
                    server=victim.name,
                    pid=pid,
                    interrupted=[
                        Interruption(str(r["run_id"]), r["attempt"], int(r["seq"])) for r in running
                    ],
                )
                self.kills.append(kill)
                self.log(
                    f"kill #{kill.index}: {victim.name} (pid {pid}) holding {len(running)} run(s)"
                )
                task = asyncio.create_task(self._restart(victim, kill))
                self._restarts.add(task)
                task.add_done_callback(self._restarted)

    def _restarted(self, task: asyncio.Task[None]) -> None:
        self._restarts.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.fatal = task.exception()

    def check_health(self) -> None:
        """Raise what stops the soak: a server that does not come back, the time limit."""
        if self.fatal is not None:
            raise RuntimeError("a server could not be restarted") from self.fatal
        if time.monotonic() - self.t0 > self.o.max_seconds:
            raise TimeoutError(f"the soak ran over {self.o.max_seconds:.0f} s")

    async def spawner(self, http: httpx.AsyncClient) -> None:
        """Keep ``concurrency`` runs in flight until the kills are done."""
        in_flight: set[asyncio.Task[None]] = set()
        try:
            while len(self.kills) < self.o.kills:
                self.check_health()
                while len(in_flight) < self.o.concurrency:
                    in_flight.add(asyncio.create_task(self.drive(http)))
                done, in_flight = await asyncio.wait(
                    in_flight, timeout=0.2, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    task.result()  # a harness failure (not a service one) ends the soak
            self.log(f"{len(self.kills)} kills done; waiting for {len(in_flight)} run(s) to end")
            if in_flight:
                done, pending = await asyncio.wait(in_flight, timeout=self.o.drain_timeout)
                for task in done:
                    task.result()
                for task in pending:
                    task.cancel()
        finally:
            for task in in_flight:
                task.cancel()

    async def run(self) -> dict[str, Any]:
        self.log(f"starting {len(self.servers)} server(s) in {self.data_dir}")
        await self.start_servers()
        self.t0 = time.monotonic()
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(10.0, read=30.0), limits=limits, headers=api_headers()
        ) as http:
            killing = asyncio.create_task(self.killer())
            spawning = asyncio.create_task(self.spawner(http))
            try:
                done, _ = await asyncio.wait(
                    {killing, spawning}, return_when=asyncio.FIRST_EXCEPTION
                )
                for task in done:
                    task.result()
                await spawning
                await killing
            finally:
                for task in (killing, spawning, *self._restarts):
                    task.cancel()
                await asyncio.gather(killing, spawning, *self._restarts, return_exceptions=True)
        return self.report()

    # -- report ------------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.t0
        results = [r.result for r in self.runs if r.result]
        by_id = {r.run_id: r for r in self.runs}
        resumed: list[float] = []
        never_resumed = 0
        for kill in self.kills:
            for cut in kill.interrupted:
                run = by_id.get(cut.run_id)
                if run is None:
                    continue
                took = run.follower.first_after(cut.seq, kill.at)
                cut.resumed_after = None if took is None else round(took, 3)
                if took is None:
                    never_resumed += 1
                else:
                    resumed.append(took)
        restarts = [k.restart_seconds for k in self.kills if k.restart_seconds is not None]
        attempts = Counter(r["attempts"] for r in results)
        problem_runs = [
            {"run_id": r["run_id"], "thread_id": r["thread_id"], "problems": r["problems"]}
            for r in results
            if r["problems"]
        ]
        summary = {
            "elapsed_seconds": round(elapsed, 1),
            "servers": len(self.servers),
            "kills": len(self.kills),
            "kills_interrupting_runs": sum(1 for k in self.kills if k.interrupted),
            "interruptions": sum(len(k.interrupted) for k in self.kills),
            "restart_failures": self.restart_failures,
            "restart_seconds": _stats(restarts),
            "runs_started": len(self.runs),
            "runs_finished": sum(1 for r in results if r["ended"]),
            "runs_success": sum(1 for r in results if r["status"] == "success"),
            "runs_verified": sum(1 for r in results if r["verified"]),
            "runs_unchecked": len(self.runs) - len(results),
            "runs_with_problems": len(problem_runs),
            "duplicated_lines": sum(r["duplicated_lines"] for r in results),
            "missing_lines": sum(r["missing_lines"] for r in results),
            "events_stored": sum(r["events_stored"] for r in results),
            "events_lost": sum(r["events_lost"] for r in results),
            "events_duplicated": sum(r["events_duplicated"] for r in results),
            "tool_results_missing": sum(r["tool_results_missing"] for r in results),
            "tool_results_repeated": sum(r["tool_results_repeated"] for r in results),
            "runs_losing_events": sum(1 for r in results if r["events_lost"]),
            "runs_duplicating_events": sum(1 for r in results if r["events_duplicated"]),
            "reconnections": sum(max(r["connections"] - 1, 0) for r in results),
            "attempts": {str(k): attempts[k] for k in sorted(attempts)},
            "skipped_appends": sum(r["skipped_appends"] for r in results),
            "resumed_progress_seconds": _stats(resumed),
            "interruptions_never_resumed": never_resumed,
            "client_errors": len(self.client_errors),
        }
        return {
            "kind": "soak",
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.o).items()},
            "summary": summary,
            "ok": ok(summary),
            "problem_runs": problem_runs,
            "client_errors": self.client_errors[:50],
            "kills": [
                {
                    "index": k.index,
                    "at": round(k.at - self.t0, 3),
                    "server": k.server,
                    "pid": k.pid,
                    "restart_seconds": k.restart_seconds,
                    "interrupted": [asdict(i) for i in k.interrupted],
                }
                for k in self.kills
            ],
            "runs": results,
        }


def result_updates(events: list[SSEEvent]) -> tuple[list[str], list[str]]:
    """Tool calls whose result (a ToolMessage in an ``updates`` event) never reached the client,
    and those whose result came more often than the call started (each execution may send one).
    """
    calls: list[str] = []
    results: Counter[str] = Counter()
    started: Counter[str] = Counter()
    for ev in events:
        if not isinstance(ev.data, dict):
            continue
        if ev.event == "custom" and ev.data.get("type") == "tool_started":
            started[str(ev.data.get("tool_call_id"))] += 1
        if ev.event != "updates":
            continue
        for update in ev.data.values():
            for message in (update.get("messages") or []) if isinstance(update, dict) else []:
                if not isinstance(message, dict):
                    continue
                if message.get("type") == "tool":
                    results[str(message.get("tool_call_id"))] += 1
                elif message.get("type") == "ai":
                    calls.extend(str(c["id"]) for c in message.get("tool_calls") or [])
    unique = sorted(set(calls))
    missing = [c for c in unique if results[c] == 0]
    repeated = [c for c in unique if results[c] > max(started[c], 1)]
    return missing, repeated


def _stats(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"count": 0, "median": None, "p90": None, "max": None}
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "median": round(statistics.median(ordered), 3),
        "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
        "max": round(ordered[-1], 3),
    }


def ok(summary: dict[str, Any]) -> bool:
    """The durability contract held for every run."""
    return bool(
        summary["runs_with_problems"] == 0
        and summary["runs_unchecked"] == 0
        and summary["runs_verified"] == summary["runs_started"]
        and summary["duplicated_lines"] == 0
        and summary["missing_lines"] == 0
        and summary["events_lost"] == 0
        and summary["events_duplicated"] == 0
        and summary["tool_results_missing"] == 0
        and summary["tool_results_repeated"] == 0
    )


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    o = report["options"]
    resumed = s["resumed_progress_seconds"]
    restart = s["restart_seconds"]
    attempts = ", ".join(f"{k}: {v}" for k, v in s["attempts"].items()) or "none"

    def secs(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f} s"

    rows = [
        ("duration", f"{s['elapsed_seconds']:.0f} s"),
        ("servers on one database", str(s["servers"])),
        (
            "SIGKILLs (each restarted at once)",
            f"{s['kills']} ({s['interruptions']} run interruptions; restart median "
            f"{secs(restart['median'])}, max {secs(restart['max'])})",
        ),
        ("runs started / finished", f"{s['runs_started']} / {s['runs_finished']}"),
        ("runs ended `success`, state `verified`", f"{s['runs_success']}, {s['runs_verified']}"),
        ("duplicated counter lines (target 0)", str(s["duplicated_lines"])),
        ("missing counter lines (target 0)", str(s["missing_lines"])),
        (
            "tool results never streamed / streamed more often than run (target 0)",
            f"{s['tool_results_missing']} / {s['tool_results_repeated']}",
        ),
        (
            "events lost / duplicated, client with `Last-Event-ID` (target 0)",
            f"{s['events_lost']} / {s['events_duplicated']} of {s['events_stored']} stored "
            f"({s['reconnections']} reconnections)",
        ),
        ("runs that broke the contract", str(s["runs_with_problems"])),
        ("attempts per run (attempts: runs)", attempts),
        ("appends re-run and skipped by the ledger", str(s["skipped_appends"])),
        (
            "kill → resumed progress (first new event)",
            f"median {secs(resumed['median'])}, p90 {secs(resumed['p90'])}, "
            f"max {secs(resumed['max'])} (n={resumed['count']})",
        ),
    ]
    head = (
        f"### Soak: {s['kills']} SIGKILLs, {o['concurrency']} counter runs in flight, "
        f"n {o['n_min']}-{o['n_max']}, delay {o['delay_min']}-{o['delay_max']} s, "
        f"lease {o['lease_seconds']} s, a kill every {o['kill_min']}-{o['kill_max']} s\n\n"
    )
    table = "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    verdict = "\n\nResult: **" + ("PASS" if report["ok"] else "FAIL") + "**"
    if report["problem_runs"]:
        verdict += "\n\n" + "\n".join(
            f"- run {p['run_id']}: {'; '.join(p['problems'])}" for p in report["problem_runs"][:20]
        )
    return head + table + verdict


async def soak(options: SoakOptions) -> dict[str, Any]:
    """Run the soak; returns the report (also written to ``options.results_dir``)."""
    url = create_database(options.database_url, prefix="soak_")
    data_dir = Path(tempfile.mkdtemp(prefix="threadline-soak-"))
    runner = Soak(options, url, data_dir)
    try:
        report = await runner.run()
    finally:
        runner.stop_servers()
        kill_strays(data_dir)
        if not options.keep:
            with contextlib.suppress(Exception):
                drop_database(options.database_url, url, prefix="soak_")
            shutil.rmtree(data_dir, ignore_errors=True)
    # The name, read as psycopg reads it (the embedded server's URL ends in ?host=/a/path).
    report["database"] = conninfo_to_dict(url)["dbname"]
    report["data_dir"] = str(data_dir)
    report["markdown"] = markdown(report)
    if options.results_dir is not None:
        options.results_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = options.results_dir / f"soak-{stamp}.json"
        path.write_text(json.dumps(report, indent=2, default=str))
        report["path"] = str(path)
    return report


def parse_args(argv: list[str] | None = None) -> SoakOptions:
    d = SoakOptions()
    p = argparse.ArgumentParser(prog="python -m eval.soak", description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=d.kills, help="SIGKILLs to deliver (%(default)s)")
    p.add_argument("--concurrency", type=int, default=d.concurrency, help="runs in flight")
    p.add_argument("--servers", type=int, default=d.servers, choices=(1, 2, 3))
    p.add_argument("--database-url", default=d.database_url, help="PostgreSQL admin URL")
    p.add_argument("--n", nargs=2, type=int, default=(d.n_min, d.n_max), metavar=("MIN", "MAX"))
    p.add_argument(
        "--delay", nargs=2, type=float, default=(d.delay_min, d.delay_max), metavar=("MIN", "MAX")
    )
    p.add_argument(
        "--kill-every",
        nargs=2,
        type=float,
        default=(d.kill_min, d.kill_max),
        metavar=("MIN", "MAX"),
        help="seconds between kills (uniform)",
    )
    p.add_argument("--lease", type=float, default=d.lease_seconds)
    p.add_argument("--heartbeat", type=float, default=d.heartbeat_seconds)
    p.add_argument("--seed", type=int)
    p.add_argument("--drain-timeout", type=float, default=d.drain_timeout)
    p.add_argument("--results-dir", type=Path, default=d.results_dir)
    p.add_argument("--keep", action="store_true", help="keep the database and data directory")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    return SoakOptions(
        kills=a.kills,
        concurrency=a.concurrency,
        servers=a.servers,
        database_url=a.database_url,
        n_min=a.n[0],
        n_max=a.n[1],
        delay_min=a.delay[0],
        delay_max=a.delay[1],
        kill_min=a.kill_every[0],
        kill_max=a.kill_every[1],
        lease_seconds=a.lease,
        heartbeat_seconds=a.heartbeat,
        seed=a.seed,
        drain_timeout=a.drain_timeout,
        results_dir=a.results_dir,
        keep=a.keep,
        verbose=not a.quiet,
    )


def main(argv: list[str] | None = None) -> None:
    options = parse_args(argv)
    report = asyncio.run(soak(options))
    print(report["markdown"])
    if "path" in report:
        print(f"\nreport: {report['path']}")
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
