"""LangChain's JavaScript SDK drives a real server: ``tests/js/*.test.mjs`` under Node's own
test runner, once per SDK that ``tests/js/package.json`` pins (``package-lock.json`` holds the
exact tree): ``@langchain/langgraph-sdk`` 1.15.0, npm's ``latest``, and 2.0.0 under the alias
``langgraph-sdk-2``. The two encode a list in a query differently (1.15.0 repeats the
parameter, 2.0.0 sends a JSON array: ``joinStream``'s ``stream_mode``), so both are run.
``tests/js/client.mjs`` imports the one ``THREADLINE_JS_SDK`` names.

Skipped only where Node or npm is missing (Node 20 is on CI's machine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.utils.keys import create_key
from tests.utils.server import ServerProcess

JS = Path(__file__).parents[1] / "js"
SDKS = sorted(json.loads((JS / "package.json").read_text())["dependencies"])
"""The packages of tests/js/package.json: each is an ``@langchain/langgraph-sdk`` version."""

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm"
)


def js_test_files() -> list[str]:
    """Every ``*.test.mjs`` of tests/js (one per area of the API)."""
    return sorted(p.name for p in JS.glob("*.test.mjs"))


def _installed(name: str) -> str | None:
    manifest = JS / "node_modules" / name / "package.json"
    if not manifest.is_file():
        return None
    version: str = json.loads(manifest.read_text())["version"]
    return version


def _locked(name: str) -> str:
    lock = json.loads((JS / "package-lock.json").read_text())
    version: str = lock["packages"][f"node_modules/{name}"]["version"]
    return version


def npm_ci() -> None:
    """Install the pinned SDKs (``npm ci`` from the lock file) unless node_modules already holds
    them at their locked versions (a fresh clone has none; an older checkout, other versions)."""
    if all(_installed(name) == _locked(name) for name in SDKS):
        return
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=300)
    for name in SDKS:
        assert _installed(name) == _locked(name), name


def run_js(url: str, sdk: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "THREADLINE_URL": url, "THREADLINE_JS_SDK": sdk}
    if key is not None:
        env["THREADLINE_API_KEY"] = key
    return subprocess.run(
        ["node", "--test", "--test-reporter=spec", *js_test_files()],
        cwd=JS,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def assert_passed(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "fail 0" in out.stdout, out.stdout[-3000:]


@pytest.mark.parametrize("sdk", SDKS)
def test_the_js_sdk_drives_the_api(server: ServerProcess, sdk: str) -> None:
    npm_ci()
    assert_passed(run_js(server.url, sdk))


def test_the_js_sdk_with_a_key(make_server: Any, database_url: str, tmp_path: Path) -> None:
    """The same flows on a server that requires built-in API keys, the SDK sending one."""
    npm_ci()
    data = tmp_path / "data"
    proc = make_server(database_url, data, env={"THREADLINE_AUTH": "keys"}, name="js-keys")
    proc.start()
    key = create_key(data, database_url, "js")
    for sdk in SDKS:
        assert_passed(run_js(proc.url, sdk, key))
        # Without the key the same SDK is refused.
        out = run_js(proc.url, sdk, "")
        assert out.returncode != 0 and "401" in out.stdout + out.stderr, sdk
