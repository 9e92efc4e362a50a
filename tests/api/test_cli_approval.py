"""``threadline run`` / ``resume`` and approvals, as a user meets them.

Without a terminal the command stops at the first approval, says how to answer, and exits 3;
``threadline resume ID --auto-approve`` finishes the thread. On a real pseudo-terminal it asks:
``e`` and new JSON arguments run the call with them; ``r`` and a message refuse it.

Every command runs in this process's database-backed mode: ``THREADLINE_URL`` names a port
nobody listens on, so no server on the machine is used instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import scrubbed_environ
from tests.utils.cli import threadline_command
from tests.utils.processes import free_port

TIMEOUT = 60.0


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {
        **scrubbed_environ(),
        "DATABASE_URL": database_url,
        "THREADLINE_DATA_DIR": str(tmp_path / "data"),
        "THREADLINE_URL": f"http://127.0.0.1:{free_port()}",
        "PYTHONUNBUFFERED": "1",
    }


def greeting(env: dict[str, str], thread_id: str) -> Path:
    return Path(env["THREADLINE_DATA_DIR"]) / "workspaces" / thread_id / "greeting.txt"


def run_without_tty(env: dict[str, str], *args: str) -> tuple[int, str]:
    """``threadline ARGS`` with stdin from /dev/null (not a terminal): exit code and output."""
    proc = subprocess.Popen(
        [*threadline_command(), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"threadline {' '.join(args)} ran over {TIMEOUT}s:\n{out.decode()}")
    return proc.returncode, out.decode(errors="replace")


class Terminal:
    """``threadline ARGS`` on a pseudo-terminal: read what it prints, type answers."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        argv = threadline_command()
        pid, fd = pty.fork()
        if pid == 0:  # the child: become threadline, on the terminal pty.fork gave it
            try:
                os.execve(argv[0], [*argv, *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.matched = 0
        self.code: int | None = None

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def _read(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False at end of output."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.output += chunk
        return bool(chunk)

    def expect(self, text: str, timeout: float = TIMEOUT) -> None:
        """Wait until the output (after what was already matched) shows ``text``."""
        want = text.encode()
        deadline = time.monotonic() + timeout
        while (at := self.output.find(want, self.matched)) < 0:
            if time.monotonic() > deadline or not self._read(deadline):
                self.close()
                pytest.fail(f"no {text!r} on the terminal; it shows:\n{self.text}")
        self.matched = at + len(want)

    def send(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def wait(self, timeout: float = TIMEOUT) -> int:
        """Read to the end and return the exit code."""
        deadline = time.monotonic() + timeout
        while self._read(deadline):
            if time.monotonic() > deadline:
                self.close()
                pytest.fail(f"threadline did not exit in {timeout}s; it shows:\n{self.text}")
        _, status = os.waitpid(self.pid, 0)
        self.code = os.waitstatus_to_exitcode(status)
        os.close(self.fd)
        return self.code

    def close(self) -> None:
        if self.code is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.code = -signal.SIGKILL


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for term in made:
        term.close()


def test_without_a_terminal_it_says_how_to_answer_then_resume_approves(
    env: dict[str, str],
) -> None:
    tid = str(uuid.uuid4())
    code, out = run_without_tty(
        env, "run", "--task", "greet", "--param", "name=Ada", "--thread", tid
    )
    assert code == 3, out
    assert f"thread {tid} waits for approval of 1 call(s)" in out
    assert f"threadline resume {tid} --auto-approve" in out
    assert f"POST /threads/{tid}/approvals" in out
    assert "[approval needed]" in out and "write_file" in out
    assert "Traceback" not in out
    assert not greeting(env, tid).exists()

    code, out = run_without_tty(env, "resume", tid, "--auto-approve")
    assert code == 0, out
    assert "→ write_file" in out
    assert "status: verified" in out
    assert greeting(env, tid).read_text() == "Hello, Ada!\n"


def test_on_a_terminal_edit_writes_the_edited_args(
    env: dict[str, str], terminals: list[Terminal]
) -> None:
    tid = str(uuid.uuid4())
    term = Terminal(env, "run", "--task", "greet", "--param", "name=Ada", "--thread", tid)
    terminals.append(term)
    term.expect(
        'write_file wants to run with {"path": "greeting.txt", "content": "Hello, Ada!\\n"}'
    )
    term.expect("(write_file is not read-only: the approval policy says 'ask')")
    term.expect("[a/e/r]")
    assert not greeting(env, tid).exists()
    term.send("x")  # not an answer: asked again
    term.expect("[a/e/r]")
    term.send("e")
    term.expect("new args (JSON): ")
    # Not the tool's arguments: the server refuses them (422) and the call is asked about
    # again (the interrupt is not used up).
    term.send(json.dumps({"path": "greeting.txt"}))
    term.expect("Invalid arguments for write_file: content: Field required")
    term.expect("[a/e/r]")
    term.send("e")
    term.expect("new args (JSON): ")
    term.send(json.dumps({"path": "greeting.txt", "content": "Hello, Terminal!\n"}))
    code = term.wait()
    # The edited content was written; the check (which wants Ada) fails on it.
    assert greeting(env, tid).read_text() == "Hello, Terminal!\n"
    assert "status: failed" in term.text, term.text
    assert code == 1, term.text


def test_on_a_terminal_reject_writes_nothing(
    env: dict[str, str], terminals: list[Terminal]
) -> None:
    tid = str(uuid.uuid4())
    term = Terminal(env, "run", "--task", "greet", "--param", "name=Ada", "--thread", tid)
    terminals.append(term)
    term.expect("[a/e/r]")
    term.send("r")
    term.expect("message for the agent: ")
    term.send("not on a Sunday")
    code = term.wait()
    assert code == 1, term.text
    assert not greeting(env, tid).exists()
    # The model got the message as the tool's result and said so.
    assert "rejected this call (not on a Sunday)" in term.text
    assert "→ write_file" not in term.text
    assert "status: failed" in term.text
