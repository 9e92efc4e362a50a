"""LangChain's JavaScript SDK drives a real server: ``tests/js/sdk.test.mjs`` under Node's own
test runner, with ``@langchain/langgraph-sdk`` pinned in ``tests/js/package-lock.json``.

Skipped only where Node or npm is missing (Node 20 is on CI's machine)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eval.harness import ServerProcess
from tests.utils.keys import create_key

JS = Path(__file__).parents[1] / "js"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm"
)


def js_test_files() -> list[str]:
    """Every ``*.test.mjs`` of tests/js (one per area of the API)."""
    return sorted(p.name for p in JS.glob("*.test.mjs"))


def npm_ci() -> None:
    """Install the pinned SDK once (``npm ci`` from the lock file) when it is not there."""
    if (JS / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        return
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=300)


def test_the_js_sdk_drives_the_api(server: ServerProcess) -> None:
    npm_ci()
    env = {**os.environ, "THREADLINE_URL": server.url}
    out = subprocess.run(
        ["node", "--test", "--test-reporter=spec", *js_test_files()],
        cwd=JS,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "fail 0" in out.stdout, out.stdout[-3000:]


def test_the_js_sdk_with_a_key(make_server: Any, database_url: str, tmp_path: Path) -> None:
    """The same flows on a server that requires built-in API keys, the SDK sending one."""
    npm_ci()
    data = tmp_path / "data"
    proc = make_server(database_url, data, env={"THREADLINE_AUTH": "keys"}, name="js-keys")
    proc.start()
    key = create_key(data, database_url, "js")
    out = subprocess.run(
        ["node", "--test", "--test-reporter=spec", *js_test_files()],
        cwd=JS,
        env={**os.environ, "THREADLINE_URL": proc.url, "THREADLINE_API_KEY": key},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "fail 0" in out.stdout, out.stdout[-3000:]
    # Without the key the same SDK is refused.
    out = subprocess.run(
        ["node", "--test", *js_test_files()],
        cwd=JS,
        env={**os.environ, "THREADLINE_URL": proc.url, "THREADLINE_API_KEY": ""},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode != 0 and "401" in out.stdout + out.stderr
