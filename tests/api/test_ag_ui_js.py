"""The official AG-UI client drives a real server: ``tests/js_ag_ui/ag_ui.test.mjs`` under Node's
own test runner, with ``@ag-ui/client`` 1.0.0's ``HttpAgent`` (``tests/js_ag_ui/package.json``
pins it, ``package-lock.json`` holds the exact tree), and ``reconnect.mjs`` across a SIGKILL of
the server. The client verifies the order of the events it receives itself: a run it rejects
fails the test.

Skipped only where Node or npm is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.utils.server import ServerProcess

JS = Path(__file__).parents[1] / "js_ag_ui"
CLIENT = "@ag-ui/client"

pytestmark = [
    pytest.mark.skipif(
        shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm"
    ),
    pytest.mark.timeout(360),
]


def _installed() -> str | None:
    manifest = JS / "node_modules" / CLIENT / "package.json"
    if not manifest.is_file():
        return None
    version: str = json.loads(manifest.read_text())["version"]
    return version


def _locked() -> str:
    lock = json.loads((JS / "package-lock.json").read_text())
    version: str = lock["packages"][f"node_modules/{CLIENT}"]["version"]
    return version


def npm_ci() -> None:
    """Install the locked client (``npm ci``) unless node_modules already holds that version."""
    if _installed() == _locked():
        return
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=300)
    assert _installed() == _locked()


def test_the_official_client(server: ServerProcess) -> None:
    assert _locked() == "1.0.0"
    npm_ci()
    out = subprocess.run(
        ["node", "--test", "--test-reporter=spec", "ag_ui.test.mjs"],
        cwd=JS,
        env={**os.environ, "THREADLINE_URL": server.url},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "pass 2" in out.stdout and "fail 0" in out.stdout, out.stdout[-3000:]
    assert "[ag-ui]" not in out.stdout + out.stderr  # no warning: nothing stripped or dropped


def test_the_official_client_continues_after_a_sigkill(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """HttpAgent streams a slow run; the server is SIGKILLed mid-stream (by the Node process,
    after two tool results) and restarted; a new HttpAgent continues the same ``runId`` with
    ``Last-Event-ID`` = the last event's ``rawEvent.threadline.event_id``. The client accepts the
    continuation (it checks every stream), and what it got before and after is the whole stream:
    nothing lost, nothing repeated, ``RUN_FINISHED`` once."""
    npm_ci()
    env = {"THREADLINE_APPROVAL_POLICY": '{"*": "auto"}'}
    proc = make_server(database_url, tmp_path, env=env).start()
    out = tmp_path / "events.json"

    def node(phase: str) -> None:
        done = subprocess.run(
            ["node", "reconnect.mjs", phase, str(out)],
            cwd=JS,
            env={**os.environ, "THREADLINE_URL": proc.url, "THREADLINE_PID": str(proc.pid)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "[ag-ui]" not in done.stdout + done.stderr  # nothing stripped or dropped

    node("start")
    assert not proc.running
    proc.start()
    node("resume")
    got = json.loads(out.read_text())
    seen, rest = got["seen"], got["rest"]
    assert got["failed"] is not None  # the first stream broke with the server
    assert "RUN_FINISHED" not in [e["type"] for e in seen]
    # The continuation: RUN_STARTED and what was open at the last event, without positions,
    # then the events after it.
    opening = [e for e in rest if "rawEvent" not in e]
    assert rest[: len(opening)] == opening and opening[0]["type"] == "RUN_STARTED"
    continued = rest[len(opening) :]
    with httpx.Client(base_url=proc.url, timeout=60) as http:
        url = f"/ag-ui/agent/threads/{got['threadId']}/runs/{got['runId']}/stream"
        whole = [event for _, event in sse_events(http, url)]
    assert seen + continued == whole
    kinds = [e["type"] for e in whole]
    assert kinds.count("RUN_FINISHED") == 1 and kinds.count("TOOL_CALL_RESULT") == 6
    assert whole[-1]["outcome"] == {"type": "success"}
    assert got["pending"] == []


def sse_events(http: httpx.Client, url: str) -> list[tuple[str | None, dict[str, Any]]]:
    """``(id, event)`` of every frame of an AG-UI stream."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    position: str | None = None
    with http.stream("GET", url) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("id:"):
                position = line[3:].strip()
            elif line.startswith("data:"):
                found.append((position, json.loads(line[5:])))
                position = None
    return found
