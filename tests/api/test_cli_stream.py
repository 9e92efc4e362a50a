"""``threadline run`` prints the agent's text as the model writes it (``messages-tuple``).

The agent talks to a scripted OpenAI-compatible server that streams its replies word by word,
slowly (``chunk_delay``). The command runs in a subprocess whose stdout is read as it comes: a
part of the answer must be on the terminal while the rest is still being written (before the
``status:`` line that ends the run), and the whole answer must be there once, not printed again
when the final message arrives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import scrubbed_environ
from tests.utils.cli import threadline_command
from tests.utils.fake_openai import FakeOpenAIServer, Reply, ToolCall
from tests.utils.processes import free_port

pytestmark = pytest.mark.timeout(120)

PLAN = "Listing the workspace before I answer."
ANSWER = (
    "The workspace holds nothing yet, so there is nothing to change: every file you asked "
    "about is absent and the task is done as it stands."
)
DELAY = 0.08
"""Seconds between two streamed chunks (a word each): the answer takes about two seconds."""


class Output:
    """A subprocess's stdout, read as it comes: every read with the time it was made."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.reads: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while piece := os.read(fd, 65536):
            self.reads.append((time.monotonic(), piece.decode(errors="replace")))

    def snapshots(self) -> Iterator[str]:
        """The output so far, after each read."""
        text = ""
        for _, piece in self.reads:
            text += piece
            yield text

    @property
    def text(self) -> str:
        return "".join(piece for _, piece in self.reads)


@pytest.fixture
def env(tmp_path: Path, database_url: str) -> dict[str, str]:
    return {
        **scrubbed_environ(),
        "THREADLINE_DATA_DIR": str(tmp_path / "data"),
        "DATABASE_URL": database_url,
        # Nothing answers there: the command serves in its own process, never a stray server.
        "THREADLINE_URL": f"http://127.0.0.1:{free_port()}",
        "PYTHONUNBUFFERED": "1",
    }


def run_streaming(env: dict[str, str], *args: str) -> tuple[int, Output]:
    proc = subprocess.Popen(
        [*threadline_command(), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out = Output(proc)
    try:
        try:
            code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"threadline {' '.join(args)} ran over 90 s:\n{out.text}")
    finally:
        out.thread.join(10)
        assert proc.stdout is not None
        proc.stdout.close()
    return code, out


def test_run_prints_the_text_as_it_streams_and_once(env: dict[str, str]) -> None:
    replies = [
        Reply(content=PLAN, tool_calls=(ToolCall("list_files", {"path": "."}),)),
        Reply(content=ANSWER),
    ]
    with FakeOpenAIServer(replies, chunk_delay=DELAY) as fake:
        env = {**env, "OPENAI_API_KEY": fake.api_key, "OPENAI_BASE_URL": fake.base_url}
        code, out = run_streaming(env, "run", "is", "anything", "left", "to", "change?")
        assert fake.pending_replies == 0
        assert all(request.get("stream") is True for request in fake.requests)

    output = out.text
    assert code == 0, output
    assert "status: agent_done" in output
    # Partial: a first part of the answer was on the terminal while the rest was not yet, and
    # before the line that ends the run.
    head = "  agent: " + ANSWER[:10]
    partial = [
        snap
        for snap in out.snapshots()
        if head in snap and ANSWER not in snap and "status:" not in snap
    ]
    assert partial, f"the answer reached the terminal only whole:\n{out.reads}"
    assert len(out.reads) > 5, out.reads
    # Once: the streamed text is not printed again when the final message arrives.
    assert output.count(ANSWER) == 1, output
    assert output.count(PLAN) == 1, output
    # Tool-call chunks do not garble the text: the plan's line holds the plan only, and the call
    # is shown by its own line.
    lines = output.splitlines()
    assert f"  agent: {PLAN}" in lines, output
    assert f"  agent: {ANSWER}" in lines, output
    assert any(line.startswith("  → list_files") for line in lines), output
