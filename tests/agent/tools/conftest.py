"""Fixtures of the tool tests: a workspace to call tools in, and a directory outside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools import ToolContext


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    """A tool call's context: an empty workspace (resolved) and the call's idempotency key."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(workspace=ws.resolve(), idempotency_key="thread-1:call-1")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, with a ``secret.txt`` no tool may reach."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("top secret")
    return out
