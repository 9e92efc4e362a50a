"""The soak's report: a summary of every run and kill, whether the durability contract held for
every run (:func:`ok`), and the same as a markdown table (:func:`markdown`)."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval.soak_loop import Soak


def build_report(soak: Soak) -> dict[str, Any]:
    """What ``soak`` saw, once its runs ended; the resume times of its kills filled in."""
    elapsed = time.monotonic() - soak.t0
    results = [r.result for r in soak.runs if r.result]
    by_id = {r.run_id: r for r in soak.runs}
    resumed: list[float] = []
    never_resumed = 0
    for kill in soak.kills:
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
    restarts = [k.restart_seconds for k in soak.kills if k.restart_seconds is not None]
    attempts = Counter(r["attempts"] for r in results)
    problem_runs = [
        {"run_id": r["run_id"], "thread_id": r["thread_id"], "problems": r["problems"]}
        for r in results
        if r["problems"]
    ]
    summary = {
        "elapsed_seconds": round(elapsed, 1),
        "servers": len(soak.servers),
        "kills": len(soak.kills),
        "kills_interrupting_runs": sum(1 for k in soak.kills if k.interrupted),
        "interruptions": sum(len(k.interrupted) for k in soak.kills),
        "restart_failures": soak.restart_failures,
        "restart_seconds": _stats(restarts),
        "runs_started": len(soak.runs),
        "runs_finished": sum(1 for r in results if r["ended"]),
        "runs_success": sum(1 for r in results if r["status"] == "success"),
        "runs_verified": sum(1 for r in results if r["verified"]),
        "runs_unchecked": len(soak.runs) - len(results),
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
        "client_errors": len(soak.client_errors),
    }
    return {
        "kind": "soak",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(soak.o).items()},
        "summary": summary,
        "ok": ok(summary),
        "problem_runs": problem_runs,
        "client_errors": soak.client_errors[:50],
        "kills": [
            {
                "index": k.index,
                "at": round(k.at - soak.t0, 3),
                "server": k.server,
                "pid": k.pid,
                "restart_seconds": k.restart_seconds,
                "interrupted": [asdict(i) for i in k.interrupted],
            }
            for k in soak.kills
        ],
        "runs": results,
    }


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
