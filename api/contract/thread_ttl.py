"""A thread's time-to-live in the API's bodies (``api.runs.thread_ttl``), in LangGraph Server's
shapes: the ``ttl`` a ``POST /threads`` or ``PATCH /threads/{id}`` sets, and the one
``GET /threads/{id}?include=ttl`` shows."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from api.contract.runs import Strict

MAX_TTL_MINUTES = 1e9
"""The longest TTL accepted (about 1,900 years)."""
TTLStrategy = Literal["delete", "keep_latest"]


class ThreadTTLBody(Strict):
    strategy: TTLStrategy = "delete"
    """``delete``: the thread and everything of it goes; ``keep_latest``: its older checkpoints
    go, it and its current state stay."""
    ttl: float = Field(gt=0, le=MAX_TTL_MINUTES)
    """Minutes from now (from each later update of the thread) until it is swept."""


class ThreadTTLInfo(BaseModel):
    strategy: TTLStrategy
    ttl_minutes: float
    expires_at: str
    """When it is swept unless it is updated before."""
