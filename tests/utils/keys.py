"""``threadline keys create`` for tests: a real key in a test server's database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import scrubbed_environ


def threadline(data_dir: Path, database_url: str, *args: str) -> str:
    """``threadline ARGS`` on that database and data directory; its standard output."""
    env = {**scrubbed_environ(), "DATABASE_URL": database_url, "THREADLINE_DATA_DIR": str(data_dir)}
    out = subprocess.run(
        [sys.executable, "-m", "cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def create_key(data_dir: Path, database_url: str, identity: str, *permissions: str) -> str:
    """A new key for ``identity`` (the command's last line)."""
    args = ["keys", "create", "--identity", identity]
    for p in permissions:
        args += ["--permission", p]
    return threadline(data_dir, database_url, *args).strip().splitlines()[-1]
