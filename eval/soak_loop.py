"""The soak's loops: ``concurrency`` counter runs kept in flight, each followed by a client that
reconnects to whichever server is up, while a killer SIGKILLs a server holding a running run at
random moments and restarts it in the background."""

from __future__ import annotations

import asyncio
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg.rows import dict_row

from eval.kill_targets import cut_short, holders, stalling_again, worker_pid
from eval.soak_checks import stored_events, verdict
from eval.soak_records import Interruption, Kill, SoakOptions, SoakRun, TimedFollower
from tests.utils.kills import STREAM_MODES
from tests.utils.server import ServerProcess, ServerStartError, api_headers


class Soak:
    """One soak: its servers, the runs it keeps in flight and the kills it made (what
    :func:`eval.soak_report.build_report` reads once :meth:`run` returned)."""

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
        stored = await stored_events(self.database_url, rid)
        return verdict(run, got, thread, stored, self.data_dir)

    # -- kills -------------------------------------------------------------------------------

    async def killer(self) -> None:
        async with await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, row_factory=dict_row
        ) as conn:
            while len(self.kills) < self.o.kills:
                await asyncio.sleep(self.rng.uniform(self.o.kill_min, self.o.kill_max))
                while True:
                    self.check_health()
                    held = await holders(conn)
                    # Not a server whose kill would stall one of its runs twice in a row.
                    spared = {worker_pid(w) for w in (await stalling_again(conn)).values()}
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
                running = await cut_short(conn, pid)
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

    async def run(self) -> None:
        """Start the servers, then run and kill until the kills are done and the runs ended."""
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
