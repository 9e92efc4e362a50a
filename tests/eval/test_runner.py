"""``python -m eval`` end to end: the ``small`` suite on a real server, plain and under SIGKILLs.

Each run goes through ``eval.runner.main`` in this process, which starts its own
``threadline serve`` on a new ``eval_<uuid>`` database and removes everything afterwards. The pure
parts (resume-time matching, suites, scheduling) are checked on synthetic data.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent.tasks import CATALOG
from eval.crash import resume_times
from eval.runner import Schedule, main
from eval.suite import load_suite

pytestmark = pytest.mark.timeout(150)


def run_main(
    tmp_path: Path, admin: str, suite: str, *extra: str
) -> tuple[int, dict[str, Any], Path]:
    report = tmp_path / "REPORT.md"
    code = main(
        [
            "--suite", suite, "--reps", "1", "--concurrency", "4", "--quiet",
            "--database-url", admin, "--timeout", "60",
            "--results-dir", str(tmp_path / "results"),
            "--report", str(report),
            "--plots-dir", str(tmp_path / "plots"),
            *extra,
        ]
    )  # fmt: skip
    [saved] = list((tmp_path / "results").glob("*.json"))
    return code, json.loads(saved.read_text()), report


def assert_cleaned_up(result: dict[str, Any], admin: str) -> None:
    server = result["server"]
    assert server["own"] and server["database"].startswith("eval_")
    with psycopg.connect(admin, autocommit=True) as conn:
        left = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (server["database"],)
        ).fetchone()
    assert left is None, "the evaluation database was not dropped"
    assert not Path(server["data_dir"]).exists()
    for pid in server["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def assert_durable(result: dict[str, Any], *, killed: bool) -> None:
    d = result["durability"]
    assert d["runs"] >= len(result["episodes"]) > 0
    assert d["runs_ended"] == d["runs"] and d["runs_errored"] == 0
    assert d["duplicate_effects"] == 0
    if not killed:
        assert d["reexecuted_calls"] == 0
    assert d["lost_events"] == 0 and d["duplicate_events"] == 0
    assert d["streams_not_contiguous"] == 0
    for episode in result["episodes"]:
        assert episode["error"] is None, episode
        # A call runs again only on a later attempt (after a kill), never twice in one.
        for call_id in {r["tool_call_id"] for r in episode["reexecuted"]}:
            attempts = [r["attempt"] for r in episode["reexecuted"] if r["tool_call_id"] == call_id]
            assert len(attempts) == len(set(attempts)) > 1, episode["reexecuted"]
        assert all(r["contiguous"] for r in episode["runs"])
        # a run stops "interrupted" at each approval ask; the last one ends the task
        statuses = [r["status"] for r in episode["runs"]]
        assert statuses[-1] == "success" and set(statuses) <= {"success", "interrupted"}


def test_small_suite_offline_passes_with_sane_metrics(tmp_path: Path, pg_admin_url: str) -> None:
    code, result, report = run_main(tmp_path, pg_admin_url, "small")

    assert code == 0
    assert "offline" in result["server"]["model"]
    overall = result["metrics"]["overall"]
    assert overall["pass_at_1"] == 1.0 and overall["pass_all"] == 1.0
    suite_tasks = [c.task for c in load_suite("small").cases]
    assert list(result["metrics"]["tasks"]) and set(result["metrics"]["tasks"]) == set(suite_tasks)
    kinds = {m["kind"] for m in result["metrics"]["tasks"].values()}
    assert kinds == {"demo", "edit", "fix", "approval"}
    by_task = {e["task"]: e for e in result["episodes"]}
    assert len(result["episodes"]) == len(suite_tasks)
    for e in result["episodes"]:
        assert e["passed"] and e["status"] == "verified"
        assert e["steps"] > 0 and e["tokens"] > 0 and e["tool_calls"] > 0
        assert e["tool_executions"] == e["tool_calls"]  # each call ran exactly once
        assert 0 < e["wall_seconds"] < 120
    assert by_task["counter"]["steps"] == 3 and by_task["counter"]["tool_calls"] == 3
    assert by_task["changelog"]["verify_attempts"] == 2  # the plan's first try fails its check
    approval_task = next(e for e in result["episodes"] if e["kind"] == "approval")
    assert approval_task["approvals"] >= 2 and len(approval_task["runs"]) >= 2
    assert overall["approvals"] == sum(e["approvals"] for e in result["episodes"])
    assert overall["tokens"] == sum(e["tokens"] for e in result["episodes"])
    assert_durable(result, killed=False)
    assert result["recovery"] is None and result["kills"] == []
    assert_cleaned_up(result, pg_admin_url)

    text = report.read_text()
    assert "| counter | demo | 1.00 | yes |" in text
    for name in ("small-pass-rate.png", "small-wall-time.png"):
        png = tmp_path / "plots" / name
        assert png.read_bytes()[:4] == b"\x89PNG" and f"plots/{name}" in text


def test_crash_mode_loses_and_duplicates_nothing(tmp_path: Path, pg_admin_url: str) -> None:
    # The "crash" suite's calls are all safe to run twice: the service runs a call again when it
    # is killed between the call's end and its checkpoint (see eval/REPORT.md), and this test
    # checks the guarantees that hold regardless (counter lines once, every event once).
    code, result, report = run_main(
        tmp_path, pg_admin_url, "crash", "--crash", "--kills", "3", "--max-uptime", "1.5"
    )

    assert code == 0, result["durability"]
    recovery = result["recovery"]
    assert recovery["kills"] == len(result["kills"]) == 3
    assert_durable(result, killed=True)
    d = result["durability"]
    assert d["runs_resumed"] >= 1, "no kill hit a run in flight"
    assert recovery["resume"]["samples"] >= 1
    assert all(0 < t < 60 for t in recovery["resume_seconds"])
    # Once the server is back, runs continue without waiting for a lease to expire for long.
    assert recovery["resume_after_restart"]["max"] < 15
    assert result["metrics"]["overall"]["pass_at_1"] == 1.0
    assert_cleaned_up(result, pg_admin_url)
    assert "Under **3 SIGKILLs**" in report.read_text()
    assert (tmp_path / "plots" / "crash-resume-time.png").exists()


# -- pure parts --------------------------------------------------------------------------------


def run(created: float, ended: float | None, times: list[float]) -> dict[str, Any]:
    return {"created_at": created, "ended_at": ended, "new_event_times": times}


def test_resume_times_match_each_kill_with_the_runs_in_flight() -> None:
    kills = [{"kill_at": 10.0, "ready_at": 12.0}, {"kill_at": 20.0, "ready_at": 23.0}]
    runs = [
        run(1.0, 12.6, [2.0, 9.9, 10.05, 12.5, 12.6]),  # in flight at kill 1: 12.5 - 10
        run(11.0, 14.0, [12.2, 14.0]),  # created while down (after the kill): not timed
        run(1.0, 9.0, [2.0, 9.0]),  # ended before kill 1
        run(5.0, None, [6.0, 24.0]),  # kill 1: no new event before kill 2 (censored); kill 2: 4
        run(15.0, 20.5, [16.0, 20.5]),  # read its end before the restart: old process, skipped
    ]
    times, after_ready, censored = resume_times(kills, runs)
    assert times == [2.5, 4.0]
    assert after_ready == [0.5, 1.0]
    assert censored == 1


def test_crash_schedule_repeats_the_suite_until_the_kills_are_done() -> None:
    class FakeKiller:
        def __init__(self) -> None:
            self.done = asyncio.Event()

    cases = load_suite("small").cases
    plain = Schedule(cases, 2, None)
    assert [plain.next() for _ in range(2 * len(cases))].count(None) == 0
    assert plain.next() is None

    killer = FakeKiller()
    crash = Schedule(cases, 1, killer)  # type: ignore[arg-type]
    handed = [crash.next() for _ in range(3 * len(cases))]
    assert None not in handed and {rep for _, rep in handed} == {0, 1, 2}  # type: ignore[misc]
    killer.done.set()
    assert crash.next() is None  # the round in progress was handed out whole; no new one


def test_suites_validate_their_tasks(tmp_path: Path) -> None:
    full = load_suite("full")
    assert [c.task for c in full.cases] == list(CATALOG)
    assert next(c for c in full.cases if c.task == "counter").params == {"n": 5, "delay": 0.1}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tasks": [{"task": "counter", "params": {"n": 0}}]}))
    with pytest.raises(ValueError, match="invalid params for task 'counter'"):
        load_suite(str(bad))
    bad.write_text(json.dumps({"tasks": [{"task": "nope"}]}))
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        load_suite(str(bad))
