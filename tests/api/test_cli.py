"""The ``threadline`` command as a user runs it: real subprocesses, a real database, kill -9.

The crash tests start ``threadline run --task counter``, SIGKILL it after some lines of
``counter.txt`` are written (the tool calls it started go on as orphans, as they would when a
server dies), then ``threadline resume`` the thread: the run must end verified with each line
exactly once. ``.counter-attempts`` logs every execution of an append; an execution is "skipped"
when the idempotency ledger shows its tool call already appended (a call that was re-run on
resume because its result had not been checkpointed before the kill).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from agent.models import NOT_CONFIGURED
from agent.tasks import CATALOG
from agent.tasks.counter import groups
from tests.conftest import scrubbed_environ
from tests.utils.cli import threadline_command
from tests.utils.db import embedded_data_dir
from tests.utils.processes import processes_in

N = 6
DELAY = 0.4
MAX_PARALLEL = max(len(g) for g in groups(N))
"""Calls one step of the counter makes at once: how many a single kill can leave unrecorded."""
RUN_TIMEOUT = 60.0


@dataclass
class Cli:
    """Runs ``threadline`` against one data directory and database."""

    data_dir: Path
    env: dict[str, str]
    logs: Path

    def workspace(self, thread_id: str) -> Path:
        return self.data_dir / "workspaces" / thread_id

    def start(self, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        """Start ``threadline ARGS`` in its own session; output goes to a log file."""
        log = self.logs / f"{uuid.uuid4().hex}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*threadline_command(), *args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return proc, log

    def run(self, *args: str, timeout: float = RUN_TIMEOUT) -> tuple[int, str]:
        """Run ``threadline ARGS`` to its end (bounded): exit code and combined output."""
        proc, log = self.start(*args)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"threadline {' '.join(args)} ran over {timeout}s:\n{log.read_text()}")
        return code, log.read_text()

    def wait_for_no_processes(self, timeout: float = 15.0) -> None:
        """Orphaned tool calls finish on their own (each takes ``DELAY``): wait for them."""
        deadline = time.monotonic() + timeout
        while left := processes_in(self.data_dir):
            if time.monotonic() > deadline:
                for pid in left:
                    os.kill(pid, signal.SIGKILL)
                pytest.fail(f"processes left running in {self.data_dir}: {left}")
            time.sleep(0.05)


@pytest.fixture
def cli(tmp_path: Path, database_url: str) -> Iterator[Cli]:
    logs = tmp_path / "logs"
    logs.mkdir()
    data_dir = tmp_path / "data"
    env = {
        **scrubbed_environ(),
        "THREADLINE_DATA_DIR": str(data_dir),
        "DATABASE_URL": database_url,
        "PYTHONUNBUFFERED": "1",
    }
    cli = Cli(data_dir=data_dir, env=env, logs=logs)
    try:
        yield cli
    finally:
        cli.wait_for_no_processes()


def count_lines(path: Path) -> int:
    try:
        return len(path.read_text().split())
    except FileNotFoundError:
        return 0


def kill_after_lines(
    cli: Cli, proc: subprocess.Popen[bytes], log: Path, counter: Path, lines: int
) -> int:
    """SIGKILL ``proc`` (only it: its tool calls go on) once ``counter`` has ``lines`` lines."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while count_lines(counter) < lines:
        if proc.poll() is not None:
            pytest.fail(
                f"threadline exited ({proc.returncode}) before line {lines}:\n{log.read_text()}"
            )
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"no line {lines} in {counter} after {RUN_TIMEOUT}s:\n{log.read_text()}")
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    return count_lines(counter)


def check_counter(workspace: Path, kills: int) -> int:
    """counter.txt holds 1..N once and each line was applied once; returns the skipped appends."""
    lines = (workspace / "counter.txt").read_text().split()
    assert sorted(lines, key=int) == [str(i) for i in range(1, N + 1)], lines
    attempts = [a.split() for a in (workspace / ".counter-attempts").read_text().splitlines()]
    applied = Counter(line for _key, outcome, line in attempts if outcome == "applied")
    assert applied == Counter(str(i) for i in range(1, N + 1)), attempts
    skipped = [a for a in attempts if a[1] == "skipped"]
    # Only a call whose result was not yet checkpointed runs again, and a step has at most
    # MAX_PARALLEL calls in flight when the process dies.
    assert len(skipped) <= kills * MAX_PARALLEL, attempts
    # Every skipped execution belongs to a call that did apply: same idempotency key.
    applied_keys = {key for key, outcome, _line in attempts if outcome == "applied"}
    assert {key for key, _o, _l in skipped} <= applied_keys
    return len(skipped)


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [1, 2, 4], ids=["step1", "mid-parallel-step2", "step3"])
def test_kill_then_resume_appends_each_line_once(cli: Cli, kill_at: int) -> None:
    thread = str(uuid.uuid4())
    counter = cli.workspace(thread) / "counter.txt"
    proc, log = cli.start(
        "run", "--task", "counter", "--param", f"n={N}", "--param", f"delay={DELAY}",
        "--thread", thread,
    )  # fmt: skip
    at_kill = kill_after_lines(cli, proc, log, counter, kill_at)
    assert at_kill < N, "the run finished before it was killed"

    code, output = cli.run("resume", thread)
    assert code == 0, output
    assert "status: verified" in output
    assert f"counter.txt holds 1..{N}, each once" in output
    skipped = check_counter(cli.workspace(thread), kills=1)
    print(f"kill after {kill_at} line(s) ({at_kill} at the kill): {skipped} append(s) skipped")
    # The same run went on, as its second attempt, taken over by the resuming process.
    assert [(r["status"], r["attempt"]) for r in runs_of(cli, thread)] == [("success", 2)]


@pytest.mark.slow
def test_repeated_kills_and_resumes_append_each_line_once(cli: Cli) -> None:
    thread = str(uuid.uuid4())
    counter = cli.workspace(thread) / "counter.txt"
    proc, log = cli.start(
        "run", "--task", "counter", "--param", f"n={N}", "--param", f"delay={DELAY}",
        "--thread", thread,
    )  # fmt: skip
    kills = 0
    for lines in (1, 3, 5):
        kill_after_lines(cli, proc, log, counter, lines)
        kills += 1
        proc, log = cli.start("resume", thread)
    assert proc.wait(timeout=RUN_TIMEOUT) == 0, log.read_text()
    output = log.read_text()
    assert "status: verified" in output
    skipped = check_counter(cli.workspace(thread), kills=kills)
    print(f"{kills} kills: {skipped} append(s) skipped")


@pytest.mark.slow
def test_resume_stops_the_embedded_postgres_a_killed_run_left(tmp_path: Path) -> None:
    """Without ``DATABASE_URL`` the CLI starts the embedded PostgreSQL of its data directory. A
    run killed with ``kill -9`` leaves it running; the ``resume`` that finishes the run adopts
    it and stops it when it exits: no process is left in the data directory."""
    with embedded_data_dir() as parent:  # not under tmp_path: see embedded_data_dir
        data_dir = parent / "data"
        env = {**scrubbed_environ(), "THREADLINE_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
        cli = Cli(data_dir=data_dir, env=env, logs=tmp_path)
        thread = str(uuid.uuid4())
        proc, log = cli.start(
            "run", "--task", "counter", "--param", "n=3", "--param", f"delay={DELAY}",
            "--thread", thread,
        )  # fmt: skip
        kill_after_lines(cli, proc, log, cli.workspace(thread) / "counter.txt", 1)
        assert processes_in(data_dir / "postgres"), "the server should outlive the killed run"

        code, output = cli.run("resume", thread)
        assert code == 0, output
        assert "database: embedded" in output and "status: verified" in output
        # The tools the killed run started end on their own; the server was stopped.
        cli.wait_for_no_processes()
        assert not (data_dir / "postgres" / "postmaster.pid").exists()


def runs_of(cli: Cli, thread_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(cli.env["DATABASE_URL"], row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT run_id, status, attempt FROM runs WHERE thread_id = %s ORDER BY created_at",
            (thread_id,),
        ).fetchall()


def test_a_terminal_run_is_queued_audited_and_stored_like_a_served_one(cli: Cli) -> None:
    """No server answers, so the CLI runs the service in its own process: the run has a row,
    its tool calls are in the audit log and its events in the event log."""
    thread = str(uuid.uuid4())
    code, output = cli.run("run", "--task", "counter", "--param", "n=2", "--thread", thread)
    assert code == 0, output
    assert "in-process" in output and "status: verified" in output
    [run] = runs_of(cli, thread)
    assert (run["status"], run["attempt"]) == ("success", 1)
    with psycopg.connect(cli.env["DATABASE_URL"], row_factory=dict_row) as conn:
        tools = conn.execute(
            "SELECT tool FROM audit_log WHERE thread_id = %s AND kind = 'tool'", (thread,)
        ).fetchall()
        events = conn.execute(
            "SELECT event FROM run_events WHERE run_id = %s ORDER BY seq", (run["run_id"],)
        ).fetchall()
    assert len(tools) == 2  # counter n=2: two appends
    assert events[0]["event"] == "metadata" and events[-1]["event"] == "end"


def test_tasks_lists_the_demo_tasks(cli: Cli) -> None:
    code, output = cli.run("tasks")
    assert code == 0, output
    names = [line.split()[0] for line in output.splitlines() if line.strip()]
    assert names == list(CATALOG)
    assert {"counter", "fix_test", "greet"} <= set(names)
    assert "n=5" in output and "delay=0.5" in output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--param", "n=0"], "invalid params for task 'counter': n:"),
        (["--param", "n=lots"], "invalid params for task 'counter': n:"),
        (["--param", "count=3"], "count"),
        (["--param", "nokey"], "--param takes KEY=VALUE, not 'nokey'"),
    ],
    ids=["out-of-range", "not-a-number", "unknown-name", "no-equals"],
)
def test_bad_param_is_a_clear_error(cli: Cli, args: list[str], expected: str) -> None:
    code, output = cli.run("run", "--task", "counter", *args, timeout=30)
    assert code != 0, output
    assert expected in output
    assert "Traceback" not in output
    # It stopped before starting anything: no workspace was made.
    assert not (cli.data_dir / "workspaces").exists()


def test_unknown_task_is_a_clear_error(cli: Cli) -> None:
    code, output = cli.run("run", "--task", "nope", timeout=30)
    assert code != 0
    assert f"unknown task 'nope'; known tasks: {', '.join(sorted(CATALOG))}" in output


def test_free_text_run_says_no_model_is_configured(cli: Cli) -> None:
    code, output = cli.run("run", "write", "me", "a", "poem")
    assert code == 0, output
    assert "model: threadline-offline" in output
    assert "database: external" in output
    # The whole answer reaches the terminal, including how to configure a model.
    assert " ".join(NOT_CONFIGURED.split()) in " ".join(output.split())
    assert "status: agent_done" in output
