"""How an attempt's graph ended, as the run's status tells it: a success only if the graph
really reached its end; and why a run that kept stalling ends."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from api.store.claimed_run import ClaimedRun

logger = logging.getLogger(__name__)


def ending(graph: Any, state: Any, kwargs: dict[str, Any]) -> tuple[bool, str | None]:
    """``(interrupted, unfinished)`` of a graph whose stream ended without an error, given its
    thread's latest state: interrupted when it waits for an answer or at one of the run's
    breakpoints (tasks left, no interrupt value); ``unfinished``, the run's error, when it has
    tasks left otherwise, and the graph compiled no breakpoint. The stream did not reach the
    graph's end then, and the run is no success (``api.durable.saver.whole_task_writes`` keeps the
    known way there shut: a task cut off with part of its writes)."""
    breakpoints = kwargs.get("interrupt_before") or kwargs.get("interrupt_after")
    interrupted = bool(state.interrupts) or bool(breakpoints and state.next)
    compiled = getattr(graph, "interrupt_before_nodes", None) or getattr(
        graph, "interrupt_after_nodes", None
    )
    if not state.next or interrupted or compiled:
        return interrupted, None
    left = ", ".join(sorted(set(state.next)))
    return False, (
        f"the graph stopped before its end with tasks left ({left}); resume the thread with a "
        "new run whose input is null"
    )


async def stalled_message(graph: Any, run: ClaimedRun) -> str:
    """Why a run ends out of attempts, naming the step where its attempts kept dying."""
    stalled = run.stalled_attempts
    where = "before it saved its first checkpoint"
    try:
        state = await graph.aget_state({"configurable": {"thread_id": run.thread_id}})
        if state.config:  # the thread has a checkpoint
            unfinished = Counter(t.name for t in state.tasks if t.result is None)
            nodes = ", ".join(
                f"'{name}'" + (f" ({count} tasks)" if count > 1 else "")
                for name, count in sorted(unfinished.items())
            )
            # The checkpoint's step is the one that saved it; its tasks run in the next.
            step = (state.metadata or {}).get("step")
            parts = [f"at step {step + 1} of the graph"] if isinstance(step, int) else []
            parts += [f"running {nodes}"] if nodes else []
            where = ", ".join(parts) or "at its latest checkpoint"
    except Exception:  # the message is best effort; the run ends either way
        logger.exception("reading the state of thread %s failed", run.thread_id)
    attempts = "attempt" if stalled == 1 else f"{stalled} attempts in a row"
    return (
        f"run stopped: its last {attempts} saved no new checkpoint; each time the process "
        f"running it died or stopped renewing its lease {where}. Fix the cause, then "
        "resume the thread with a new run whose input is null."
    )
