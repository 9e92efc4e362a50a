"""The ``threadline`` command as the tests start it."""

from __future__ import annotations

import sys
from pathlib import Path


def threadline_command() -> list[str]:
    """The installed ``threadline`` script next to this interpreter, else ``python -m cli``."""
    script = Path(sys.executable).with_name("threadline")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]
