"""The bodies of the assistants and of the service itself: an assistant (a graph), the health
check, and ``/info`` with the deployment's approval policy.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class Assistant(BaseModel):
    assistant_id: str
    graph_id: str
    name: str
    config: dict[str, Any]
    metadata: dict[str, Any]


class Health(BaseModel):
    ok: bool


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
