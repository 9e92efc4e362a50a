"""What a kill test plans and what it finds: the moments to SIGKILL a server
(:class:`KillPlan` of :class:`KillPoint`), and what happened to the run (:class:`Outcome`, whose
:meth:`Outcome.problems` names what broke the durability contract, if anything).

:meth:`KillPlan.random` draws random moments for the evaluation's crash mode.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.utils.sse import SSEEvent


@dataclass
class KillPoint:
    """One moment to SIGKILL a server: when any condition given holds (all None: at once)."""

    counter_lines: int | None = None
    """``counter.txt`` of the run's thread has at least this many lines."""
    event: Callable[[SSEEvent], bool] | None = None
    nth: int = 1
    """... or the ``nth`` distinct event matching ``event`` has been read."""
    after_seconds: float | None = None
    """... or this long passed since the run was created or the previous restart finished."""
    target: int = 0
    """Index of the server to kill (``servers[target]``)."""
    restart: bool = True
    restart_delay: float = 0.0
    """Seconds to stay down before restarting."""
    label: str = ""

    def describe(self) -> str:
        if self.label:
            return self.label
        parts = []
        if self.counter_lines is not None:
            parts.append(f"counter.txt has {self.counter_lines} line(s)")
        if self.event is not None:
            parts.append(f"event #{self.nth} matching {getattr(self.event, '__name__', 'pred')}")
        if self.after_seconds is not None:
            parts.append(f"{self.after_seconds:.2f} s")
        return " or ".join(parts) or "at once"


def is_custom(kind: str) -> Callable[[SSEEvent], bool]:
    """A predicate: a ``custom`` event of ``type`` ``kind`` (``tool_started``, ``step``, ...)."""

    def predicate(ev: SSEEvent) -> bool:
        return ev.event == "custom" and isinstance(ev.data, dict) and ev.data.get("type") == kind

    predicate.__name__ = f"custom:{kind}"
    return predicate


def is_update_from(node: str) -> Callable[[SSEEvent], bool]:
    """A predicate: an ``updates`` event from ``node`` (``agent``, ``tools``, ``verify``)."""

    def predicate(ev: SSEEvent) -> bool:
        return ev.event == "updates" and isinstance(ev.data, dict) and node in ev.data

    predicate.__name__ = f"updates:{node}"
    return predicate


@dataclass
class KillPlan:
    points: list[KillPoint] = field(default_factory=list)

    @classmethod
    def random(
        cls,
        rng: random.Random,
        *,
        kills: int = 1,
        max_lines: int | None = None,
        max_seconds: float = 3.0,
        restart_delay: float = 0.0,
    ) -> KillPlan:
        """``kills`` random moments: a random line count of ``counter.txt`` (when ``max_lines``
        is given, half of the time; non-decreasing along the plan) or a random delay up to
        ``max_seconds`` after the previous restart. A count already reached fires right after
        the restart: a kill during recovery, a moment worth testing too."""
        kinds = [bool(max_lines) and rng.random() < 0.5 for _ in range(kills)]
        lines = iter(sorted(rng.randint(0, max_lines or 0) for k in kinds if k))
        points = []
        for by_lines in kinds:
            if by_lines:
                points.append(KillPoint(counter_lines=next(lines), restart_delay=restart_delay))
            else:
                points.append(
                    KillPoint(
                        after_seconds=round(rng.uniform(0.05, max_seconds), 3),
                        restart_delay=restart_delay,
                    )
                )
        return cls(points)


@dataclass
class KillRecord:
    point: str
    at: float
    """Seconds since the run was created."""
    events_seen: int
    counter_lines: int
    pid: int | None
    server: str


@dataclass
class Outcome:
    """What happened to one run under a kill plan, as the service and a client saw it."""

    thread_id: str
    run_id: str
    status: str | None
    run: dict[str, Any]
    thread: dict[str, Any]
    events: list[SSEEvent]
    counter: list[str]
    kills: list[KillRecord]
    connections: int
    elapsed: float
    error: str | None = None

    @property
    def ids(self) -> list[int]:
        return [e.seq for e in self.events if e.seq is not None]

    @property
    def attempts(self) -> list[int]:
        return [
            int(e.data["attempt"])
            for e in self.events
            if e.event == "metadata" and isinstance(e.data, dict) and "attempt" in e.data
        ]

    @property
    def end(self) -> SSEEvent | None:
        ends = [e for e in self.events if e.event == "end"]
        return ends[-1] if ends else None

    def problems(
        self, *, counter_n: int | None = None, expect_status: str | None = "success"
    ) -> list[str]:
        """Every way the run broke the contract; empty when it kept it.

        Checks: the run ended (with ``expect_status``); the client read each event exactly once
        with ids 1..N contiguous and ``end`` last; attempts grew; ``counter.txt`` holds 1..n once.
        """
        out: list[str] = []
        if self.error:
            out.append(self.error)
        if expect_status is not None and self.status != expect_status:
            out.append(f"run status {self.status!r}, expected {expect_status!r}")
        ids = self.ids
        dups = sorted({i for i in ids if ids.count(i) > 1})
        if dups:
            out.append(f"events read more than once: ids {dups}")
        if ids != list(range(1, len(ids) + 1)) and not dups:
            out.append(f"event ids not contiguous from 1: {ids}")
        end = self.end
        if end is None or self.events[-1] is not end:
            out.append("the stream did not end with an 'end' event")
        elif isinstance(end.data, dict) and end.data.get("status") != self.status:
            out.append(f"the end event says {end.data}, the run says {self.status!r}")
        attempts = self.attempts
        if not attempts or attempts[0] < 1 or attempts != sorted(set(attempts)):
            out.append(f"metadata attempts {attempts} are not increasing from the first")
        if counter_n is not None:
            want = [str(i) for i in range(1, counter_n + 1)]
            if sorted(self.counter, key=_int_or_str) != want:
                out.append(
                    f"counter.txt holds {self.counter}, expected each of 1..{counter_n} once"
                )
        return out


def _int_or_str(value: str) -> tuple[int, Any]:
    try:
        return (0, int(value))
    except ValueError:
        return (1, value)
