"""The agent's run context: what a caller passes as ``context`` on a run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Context:
    user_id: str
    tier: str = "basic"
