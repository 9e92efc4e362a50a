"""What the soak is told and what it keeps: its options, each run it followed (with the time
every event reached the client), and each kill with the runs it cut short."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.utils.sse import SSEEvent, StreamFollower

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
