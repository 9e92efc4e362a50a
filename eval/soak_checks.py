"""One soak run checked: what its client read against what the server stored and what the
run's workspace holds (``counter.txt``, the idempotency ledger's skipped appends)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from eval.soak_records import SoakRun
from tests.utils.kill_plan import Outcome
from tests.utils.sse import SSEEvent
from tests.utils.workspace import counter_lines, workspace_path


async def stored_events(database_url: str, run_id: str) -> dict[str, Any]:
    """How many events the server stored for the run (``count``) and its last id (``max``)."""
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        cur = await conn.execute(
            "SELECT count(*) AS count, coalesce(max(seq), 0) AS max FROM run_events"
            " WHERE run_id = %s",
            (uuid.UUID(run_id),),
        )
        stored = await cur.fetchone()
    assert stored is not None
    return stored


def verdict(
    run: SoakRun,
    got: dict[str, Any],
    thread: dict[str, Any],
    stored: dict[str, Any],
    data_dir: Path,
) -> dict[str, Any]:
    """The run's result: ``got`` (the run) and ``thread`` as the API answers them and ``stored``
    (:func:`stored_events`) against what the client read and the workspace holds; its
    ``problems`` name every way the run broke the contract."""
    tid, rid = run.thread_id, run.run_id
    ids = [e.seq for e in run.follower.events if e.seq is not None]
    lost = len(set(range(1, int(stored["max"]) + 1)) - set(ids))
    duplicated_events = len(ids) - len(set(ids))
    lines = counter_lines(data_dir, tid)
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
        "skipped_appends": skipped_appends(data_dir, tid),
        "elapsed": outcome.elapsed,
        "problems": problems,
    }


def skipped_appends(data_dir: Path, thread_id: str) -> int:
    """Appends the ``counter`` task's idempotency ledger skipped (re-runs of a done append)."""
    try:
        log = workspace_path(data_dir, thread_id, ".counter-attempts").read_text()
    except FileNotFoundError:
        return 0
    return sum(1 for line in log.splitlines() if " skipped " in line)


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
