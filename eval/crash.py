"""Crash mode: SIGKILL the server at random moments while the suite runs, and time the recovery.

The moments come from :meth:`tests.utils.kill_plan.KillPlan.random` (a random uptime after each
restart); each kill is ``kill -9`` of the server process, then a restart on the same port (the
tools it had started keep running, as after a real crash). :func:`resume_times` then matches every
kill with the runs that were in flight: the time from the kill to the first *new* event their
client read.

The server runs with the default settings, attempts limit included (a run ends in error after
``THREADLINE_MAX_ATTEMPTS`` attempts in a row that saved nothing). A kill that comes due while a
run's previous attempt saved nothing and its current one has not saved anything yet waits until
that run moved on (:func:`eval.kill_targets.wait_until_no_run_stalls_again`): random kills then
never stall a run twice in a row, and every run of the suite can end.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from eval.kill_targets import wait_until_no_run_stalls_again
from tests.utils.kill_plan import KillPlan
from tests.utils.server import ServerProcess, ServerStartError

START_TRIES = 3


@dataclass
class KillRecord:
    kill_at: float
    """Clock time of the SIGKILL."""
    ready_at: float
    """Clock time the restarted server answered ``/ok``."""
    uptime: float
    """How long the server had been up (since the previous restart) when it was killed."""
    pid: int | None


@dataclass
class Killer:
    """Kills and restarts ``server`` ``kills`` times, at the plan's moments, until stopped."""

    server: ServerProcess
    kills: int
    clock: Callable[[], float]
    seed: int = 0
    max_uptime: float = 3.0
    records: list[KillRecord] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stop: asyncio.Event) -> None:
        plan = KillPlan.random(
            random.Random(self.seed), kills=self.kills, max_seconds=self.max_uptime
        )
        up_since = self.clock()
        try:
            for point in plan.points:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=point.after_seconds or 0.0)
                    return  # the suite finished first
                except TimeoutError:
                    pass
                database_url = self.server.env.get("DATABASE_URL")
                if database_url:
                    await wait_until_no_run_stalls_again(database_url)
                if stop.is_set():
                    return
                pid = self.server.pid
                kill_at = self.clock()
                await asyncio.to_thread(self.server.kill)
                await self._start()
                ready_at = self.clock()
                uptime = round(kill_at - up_since, 4)
                self.records.append(KillRecord(round(kill_at, 4), round(ready_at, 4), uptime, pid))
                up_since = ready_at
        finally:
            self.done.set()

    async def _start(self) -> None:
        for attempt in range(1, START_TRIES + 1):
            try:
                await asyncio.to_thread(self.server.start)
                return
            except ServerStartError:
                if attempt == START_TRIES:
                    raise


def resume_times(
    kills: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]]
) -> tuple[list[float], list[float], int]:
    """Seconds from each kill to the first new event of each run in flight at that kill.

    A run is in flight at a kill when the runner had created it before the kill and its client
    had not yet read its ``end`` (anything read before the restart finished came from the old
    process). A run with no new event before the next kill is *censored* (counted, not timed).
    Returns (seconds from the kill, seconds from the restarted server's first ``/ok``, censored).
    """
    times: list[float] = []
    after_ready: list[float] = []
    censored = 0
    ordered = sorted(kills, key=lambda k: k["kill_at"])
    for i, kill in enumerate(ordered):
        next_kill = ordered[i + 1]["kill_at"] if i + 1 < len(ordered) else math.inf
        for run in runs:
            ended = run.get("ended_at")
            if run["created_at"] >= kill["kill_at"] or (
                ended is not None and ended < kill["ready_at"]
            ):
                continue
            first = next((t for t in run["new_event_times"] if t >= kill["ready_at"]), None)
            if first is None or first >= next_kill:
                censored += 1
                continue
            times.append(round(first - kill["kill_at"], 4))
            after_ready.append(round(first - kill["ready_at"], 4))
    return times, after_ready, censored


def records_json(records: Sequence[KillRecord]) -> list[dict[str, Any]]:
    return [asdict(r) for r in records]
