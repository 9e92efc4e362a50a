"""``langgraph dev`` (LangGraph's in-memory development server) on the no-work graph.

It is optional: ``pip install -e '.[langgraph-dev]'`` puts ``langgraph`` beside this Python, or
``--langgraph-dev PATH`` (env ``BENCH_LANGGRAPH_DEV``) names the ``langgraph`` executable of
another environment (its ``langgraph-api`` pins ``jsonschema-rs<0.45``, which takes schemathesis
back to 4.15 in ours, so a venv of its own is the clean way). Nothing is measured when it is
missing; the report says "not installed".
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.service import ManagedProcess, clean_env, free_port


def find(spec: str) -> tuple[Path | None, str]:
    """The ``langgraph`` executable for ``spec`` (``auto``, ``off`` or a path), or why none."""
    if spec == "off":
        return None, "skipped (--langgraph-dev off)"
    if spec != "auto":
        path = Path(spec)
        if path.is_dir():
            path = path / "langgraph"
        if path.is_file():
            return path, f"{path}"
        return None, f"not installed: {spec} is not a langgraph executable"
    beside = Path(sys.executable).parent / "langgraph"
    if beside.is_file():
        return beside, str(beside)
    found = shutil.which("langgraph")
    if found:
        return Path(found), found
    return None, (
        "not installed (pip install -e '.[langgraph-dev]', or --langgraph-dev PATH to the "
        "langgraph executable of another venv)"
    )


def version_of(exe: Path) -> dict[str, str]:
    """The versions of ``langgraph-cli``, ``langgraph-api`` and the in-memory runtime there."""
    code = (
        "import json; from importlib.metadata import version as v\n"
        "out = {}\n"
        "for name in ('langgraph-cli', 'langgraph-api', 'langgraph-runtime-inmem', 'langgraph'):\n"
        "    try: out[name] = v(name)\n"
        "    except Exception: out[name] = 'missing'\n"
        "print(json.dumps(out))"
    )
    python = exe.parent / "python"
    try:
        done = subprocess.run(
            [str(python if python.exists() else sys.executable), "-c", code],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return dict(json.loads(done.stdout))
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        return {"error": f"{type(err).__name__}: {err}"}


class LangGraphDev(ManagedProcess):
    """``langgraph dev --no-browser --no-reload --port N`` on ``config``, one process (its queue,
    threads and checkpoints in memory), stopped with SIGTERM."""

    tail_lines = 20

    def __init__(self, exe: Path, config: Path, *, jobs: int | None, log_path: Path) -> None:
        self.exe, self.config, self.log_path = exe, config, log_path
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.startup_s: float | None = None
        self.cmd = [
            str(exe),
            "dev",
            "--no-browser",
            "--no-reload",
            "--port",
            str(self.port),
            "--config",
            str(config),
            *(["--n-jobs-per-worker", str(jobs)] if jobs is not None else []),
            "--server-log-level",
            "WARNING",
        ]
        self.env = {
            **clean_env(),
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
            "LOG_LEVEL": "WARNING",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> None:
        log = self.log_path.open("ab")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            cwd=self.config.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        while time.perf_counter() < t0 + timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"langgraph dev exited with code {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                if httpx.get(self.base_url + "/ok", timeout=2).status_code == 200:
                    self.startup_s = time.perf_counter() - t0
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"langgraph dev was not ready within {timeout}s:\n{self.log_tail()}")
