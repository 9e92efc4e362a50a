"""Metrics over episodes: per task, per kind and overall; and recovery under kills.

- ``pass@1``: the share of a task's episodes whose final status is ``verified`` (the expected
  pass rate of one attempt); overall, the mean over tasks.
- ``pass^k``: whether *all* k episodes of a task passed (reliability, not luck); overall, the
  share of tasks for which they did. k is the number of repetitions.
- steps (model calls), tool calls and tokens come from the thread's final state (``usage``);
  wall time is from creating the first run to reading the last ``end``, approvals included.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from eval.crash import resume_times


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return round(statistics.fmean(items), 4) if items else None


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 4)


def spread(values: Sequence[float]) -> dict[str, float | None]:
    return {
        "median": round(statistics.median(values), 4) if values else None,
        "p90": quantile(values, 0.9),
        "max": round(max(values), 4) if values else None,
    }


def task_metrics(episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Metrics of one task's episodes."""
    passes = sum(bool(e["passed"]) for e in episodes)
    walls = [e["wall_seconds"] for e in episodes]
    return {
        "kind": episodes[0]["kind"],
        "episodes": len(episodes),
        "passes": passes,
        "pass_at_1": round(passes / len(episodes), 4),
        "pass_all": passes == len(episodes),
        "steps": _mean(e.get("steps") or 0 for e in episodes),
        "tool_calls": _mean(e.get("tool_calls") or 0 for e in episodes),
        "tokens": _mean(e.get("tokens") or 0 for e in episodes),
        "verify_attempts": _mean(e.get("verify_attempts") or 0 for e in episodes),
        "approvals": _mean(e["approvals"] for e in episodes),
        "wall_seconds": spread(walls),
        "errors": sum(e["error"] is not None for e in episodes),
    }


def group(episodes: Sequence[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in episodes:
        out.setdefault(e[key], []).append(e)
    return out


def summarize(episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per task, per kind and overall metrics (tasks in the order they first ran)."""
    tasks = {name: task_metrics(eps) for name, eps in group(episodes, "task").items()}
    kinds: dict[str, Any] = {}
    for kind, names in group(
        [{"kind": m["kind"], "task": n} for n, m in tasks.items()], "kind"
    ).items():
        ms = [tasks[x["task"]] for x in names]
        kinds[kind] = {
            "tasks": len(ms),
            "pass_at_1": _mean(m["pass_at_1"] for m in ms),
            "pass_all": _mean(float(m["pass_all"]) for m in ms),
        }
    walls = [e["wall_seconds"] for e in episodes]
    overall = {
        "tasks": len(tasks),
        "episodes": len(episodes),
        "k": min((m["episodes"] for m in tasks.values()), default=0),
        "pass_at_1": _mean(m["pass_at_1"] for m in tasks.values()),
        "pass_all": _mean(float(m["pass_all"]) for m in tasks.values()),
        "steps": sum(e.get("steps") or 0 for e in episodes),
        "tool_calls": sum(e.get("tool_calls") or 0 for e in episodes),
        "tokens": sum(e.get("tokens") or 0 for e in episodes),
        "approvals": sum(e["approvals"] for e in episodes),
        "wall_seconds": spread(walls),
        "errors": sum(e["error"] is not None for e in episodes),
    }
    return {"overall": overall, "kinds": kinds, "tasks": tasks}


STALL_SECONDS = 5.0
"""A run silent this long with no kill in between has stalled (offline steps take milliseconds)."""


def stalled(run: dict[str, Any], kills: Sequence[dict[str, Any]]) -> bool:
    """A gap of ``STALL_SECONDS`` between two new events of ``run`` that no kill explains."""
    times = run["new_event_times"]
    return any(
        b - a > STALL_SECONDS and not any(a <= k["kill_at"] <= b for k in kills)
        for a, b in itertools.pairwise(times)
    )


def durability(
    episodes: Sequence[dict[str, Any]], kills: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """What the durability contract promises, counted over every run of every episode."""
    runs = [r for e in episodes for r in e["runs"]]
    return {
        "runs": len(runs),
        "runs_ended": sum(r["status"] is not None for r in runs),
        "runs_errored": sum(r["status"] == "error" for r in runs),
        "runs_resumed": sum(max(r["attempts"], default=1) > 1 for r in runs),
        "episodes_finished": sum(e["error"] is None for e in episodes),
        "user_resumes": sum(e.get("user_resumes") or 0 for e in episodes),
        "duplicate_effects": sum(e.get("duplicate_effects") or 0 for e in episodes),
        "reexecuted_calls": sum(e.get("reexecuted_calls") or 0 for e in episodes),
        "reexecuted_by_tool": reexecuted_by_tool(episodes),
        "lost_events": sum(e["lost_events"] for e in episodes),
        "duplicate_events": sum(e["duplicate_events"] for e in episodes),
        "streams_not_contiguous": sum(not r["contiguous"] for r in runs),
        "runs_stalled": sum(stalled(r, kills) for r in runs),
    }


def reexecuted_by_tool(episodes: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Extra executions per tool: calls run again after a crash (audit rows sharing a key)."""
    extra: dict[str, int] = {}
    for e in episodes:
        calls: dict[str, list[str]] = {}
        for row in e.get("reexecuted") or []:
            calls.setdefault(row["tool_call_id"], []).append(row["tool"])
        for tools in calls.values():
            extra[tools[0]] = extra.get(tools[0], 0) + len(tools) - 1
    return dict(sorted(extra.items()))


def recovery(episodes: Sequence[dict[str, Any]], kills: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Crash mode: kills, restarts and the time runs took to resume."""
    runs = [r for e in episodes for r in e["runs"]]
    times, after_ready, censored = resume_times(kills, runs)
    restarts = [k["ready_at"] - k["kill_at"] for k in kills]
    return {
        "kills": len(kills),
        "resume_seconds": times,
        "resume": {**spread(times), "samples": len(times), "censored": censored},
        "resume_after_restart": spread(after_ready),
        "restart": spread(restarts),
    }


def problems(result: dict[str, Any]) -> list[str]:
    """Broken promises in a result: duplicates, lost events, runs that never ended."""
    d = result["durability"]
    out = []
    for key in ("duplicate_effects", "lost_events", "duplicate_events", "streams_not_contiguous"):
        if d[key]:
            out.append(f"{key.replace('_', ' ')}: {d[key]}")
    if d["runs_ended"] != d["runs"]:
        out.append(f"{d['runs'] - d['runs_ended']} run(s) never ended")
    return out
