"""The bodies of the assistants and of the service itself: an assistant (a graph), the health
check, and ``/info`` with the deployment's approval policy.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from api.schemas import Id, Lenient, Metadata
from api.validation import MAX_ID_LENGTH, MAX_OFFSET


class Assistant(BaseModel):
    """A served graph as an assistant (one per graph, ``assistant_id`` = ``graph_id``)."""

    assistant_id: str
    graph_id: str
    name: str
    description: str | None = None
    config: dict[str, Any]
    context: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any]
    version: int = 1
    created_at: str
    """The server's start time: assistants are the served graphs, made when the server starts."""
    updated_at: str


class AssistantSelected(BaseModel):
    """An assistant in a search answer: with ``select``, only the fields it names."""

    assistant_id: str | None = None
    graph_id: str | None = None
    name: str | None = None
    description: str | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    version: int | None = None
    created_at: str | None = None
    updated_at: str | None = None


AssistantField = Literal[
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "metadata",
    "version",
    "created_at",
    "updated_at",
]


class AssistantSearch(Lenient):
    """``POST /assistants/search`` (the SDK's ``client.assistants.search``)."""

    graph_id: Id | None = None
    name: str | None = Field(None, max_length=MAX_ID_LENGTH)
    """A case-insensitive substring of the assistant's name."""
    metadata: Metadata | None = None
    """Containment, as for threads (assistants have empty metadata: a filter matches none)."""
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[AssistantField] | None = None


class AssistantCount(Lenient):
    graph_id: Id | None = None
    name: str | None = Field(None, max_length=MAX_ID_LENGTH)
    metadata: Metadata | None = None


class AssistantSchemas(BaseModel):
    """JSON schemas of a graph (null where one cannot be generated)."""

    graph_id: str
    input_schema: Any = None
    output_schema: Any = None
    state_schema: Any = None
    config_schema: Any = None
    context_schema: Any = None


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
