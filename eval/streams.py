"""Following a run's stream like a reconnecting client, and what that client saw of it.

:class:`TimedFollower` is the harness's :class:`~tests.utils.sse.StreamFollower` (reconnects with
``Last-Event-ID`` after any drop) that also notes when each *new* event arrived, so a kill can be
matched with the first event produced after the restart. :class:`RunTrace` keeps the facts the
metrics need: ids read (with repeats), attempts, end status, and those arrival times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.utils.sse import SSEEvent, StreamFollower


@dataclass
class TimedFollower(StreamFollower):
    clock: Callable[[], float] = time.monotonic
    new_event_times: list[float] = field(default_factory=list)
    """When each event with an id above every id read before it arrived (``clock`` time)."""

    def _take(self, frame: SSEEvent) -> None:
        seq = frame.seq
        if (
            not frame.is_comment
            and seq is not None
            and (self.last_event_id is None or seq > self.last_event_id)
        ):
            self.new_event_times.append(round(self.clock(), 4))
        super()._take(frame)


@dataclass
class RunTrace:
    """One run as the reconnecting client read it."""

    run_id: str
    created_at: float
    """When the runner knew the run existed (clock time)."""
    ended_at: float | None = None
    status: str | None = None
    """The ``end`` event's status (``success``, ``interrupted``, ``error``); None: no end read."""
    error: str | None = None
    """The kind of the run's ``error`` event (``AttemptsExhausted``, ...), if it had one."""
    ids: list[int] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)
    connections: int = 0
    new_event_times: list[float] = field(default_factory=list)

    @classmethod
    def from_follower(cls, follower: TimedFollower, created_at: float) -> RunTrace:
        events = follower.events
        end = next((e for e in reversed(events) if e.event == "end"), None)
        error = next((e.data for e in events if e.event == "error"), None)
        return cls(
            run_id=follower.run_id,
            created_at=round(created_at, 4),
            ended_at=follower.new_event_times[-1] if end is not None else None,
            status=end.data.get("status")
            if end is not None and isinstance(end.data, dict)
            else None,
            error=str(error.get("error")) if isinstance(error, dict) else None,
            ids=[e.seq for e in events if e.seq is not None],
            attempts=[
                int(e.data["attempt"])
                for e in events
                if e.event == "metadata" and isinstance(e.data, dict) and "attempt" in e.data
            ],
            connections=follower.connections,
            new_event_times=list(follower.new_event_times),
        )

    @property
    def ended(self) -> bool:
        return self.status is not None

    @property
    def lost_events(self) -> int:
        """Ids missing from 1..the highest id read (a gap the replay should have filled)."""
        seen = set(self.ids)
        return (max(seen) - len(seen)) if seen else 0

    @property
    def contiguous(self) -> bool:
        """Ids read were exactly 1, 2, ..., N in order, and the last event was ``end``."""
        return self.ended and self.ids == list(range(1, len(self.ids) + 1))

    @property
    def duplicate_events(self) -> int:
        """Events the client was handed more than once."""
        return len(self.ids) - len(set(self.ids))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            events=len(self.ids),
            contiguous=self.contiguous,
            lost_events=self.lost_events,
            duplicate_events=self.duplicate_events,
        )
        del out["ids"]
        return out
