"""Assistant bodies, in the shapes of the LangGraph Server API that the SDK reads
(``langgraph_sdk.schema.Assistant``, ``AssistantVersion``, ``GraphSchema``). Every request body
is strict: a field this server does not know is a 422 that names it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, WithJsonSchema

from api.contract.runs import Id, Metadata, RunConfig, Strict
from api.platform.validation import MAX_ID_LENGTH, MAX_OFFSET


def _config(value: dict[str, Any]) -> dict[str, Any]:
    RunConfig.model_validate(value)
    return value  # stored as sent


_CONFIG_SCHEMA = RunConfig.model_json_schema()
_CONFIG_SCHEMA.pop("$defs", None)
AssistantConfig = Annotated[
    dict[str, Any],
    AfterValidator(_config),
    WithJsonSchema(
        {
            **_CONFIG_SCHEMA,
            "description": "The config of the assistant's runs: each run's config is merged "
            "over it (top-level keys, and configurable key by key).",
        }
    ),
]
Context = Annotated[
    dict[str, Any],
    Field(description="Static context of the assistant's runs (Runtime.context)."),
]
Name = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
Description = Annotated[str, Field(max_length=10_000)]


class Assistant(BaseModel):
    """A graph with its own config, context and metadata; every served graph has a default
    one, ``uuid5(NAMESPACE_GRAPH, graph_id)``."""

    assistant_id: str
    graph_id: str
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    name: str
    description: str | None
    version: int
    created_at: str
    updated_at: str


class AssistantVersion(BaseModel):
    """One version of an assistant (each update adds one)."""

    assistant_id: str
    version: int
    graph_id: str
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    name: str
    description: str | None
    created_at: str


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


class AssistantCreate(Strict):
    """``POST /assistants`` (the SDK's ``client.assistants.create``)."""

    graph_id: Id
    """A served graph (GET /info lists them)."""
    assistant_id: str | None = Field(None, max_length=MAX_ID_LENGTH)
    """A UUID; a new one when left out."""
    config: AssistantConfig = Field(default_factory=dict)
    context: Context | None = None
    metadata: Metadata = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: Name = "Untitled"
    description: Description | None = None


class AssistantPatch(Strict):
    """``PATCH /assistants/{id}``: a new version; what is left out is kept, ``metadata`` is
    merged into the assistant's."""

    graph_id: Id | None = None
    config: AssistantConfig | None = None
    context: Context | None = None
    metadata: Metadata | None = None
    name: Name | None = None
    description: Description | None = None


Limit = Annotated[int, Field(ge=1, le=1000)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]


class AssistantSearch(Strict):
    """``POST /assistants/search`` (the SDK's ``client.assistants.search``)."""

    graph_id: Id | None = None
    name: str | None = Field(None, max_length=MAX_ID_LENGTH)
    """A case-insensitive substring of the assistant's name."""
    metadata: Metadata | None = None
    """Containment: every key/value given is in the assistant's metadata."""
    limit: Limit = 10
    offset: Offset = 0
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[AssistantField] | None = Field(None, max_length=20)


class AssistantCount(Strict):
    graph_id: Id | None = None
    name: str | None = Field(None, max_length=MAX_ID_LENGTH)
    metadata: Metadata | None = None


class AssistantVersionsSearch(Strict):
    """``POST /assistants/{id}/versions``: newest first."""

    metadata: Metadata | None = None
    limit: Limit = 10
    offset: Offset = 0


class AssistantVersionChange(Strict):
    """``POST /assistants/{id}/latest``: the version the assistant is at from now on."""

    version: int = Field(ge=1, le=2**31 - 1)


class AssistantSchemas(BaseModel):
    """JSON schemas of a graph (null where one cannot be generated)."""

    graph_id: str
    input_schema: Any = None
    output_schema: Any = None
    state_schema: Any = None
    config_schema: Any = None
    context_schema: Any = None
