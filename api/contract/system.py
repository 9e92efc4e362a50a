"""The bodies of the service itself: the health check, and ``/info`` with the deployment's
approval policy (the assistants' are in :mod:`api.contract.assistants`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Health(BaseModel):
    ok: bool
    database: Literal["up"] = "up"
    """The database answers (while it does not, ``/ok`` answers ``503`` with ``Retry-After``)."""


class PolicyInfo(BaseModel):
    rules: dict[str, Literal["auto", "ask", "deny"]]
    """The deployment's rules (``THREADLINE_APPROVAL_POLICY``)."""
    effective: dict[str, Literal["auto", "ask", "deny"]]
    """Each tool's rule before a task's own rules; a run may only tighten it."""
    run_overrides: Literal["allowed", "tighten only"]


class Info(BaseModel):
    version: str
    model: str
    database: str
    assistants: list[str]
    langgraph: str
    sandbox: Literal["bwrap", "off", "unavailable"]
    """How commands run: confined by bubblewrap, unconfined (``THREADLINE_SANDBOX=off``), or
    refused because no sandbox can start."""
    auth: Literal["none", "keys", "custom"]
    authentication: str
    insecure_no_auth: bool
    approval_policy: PolicyInfo
