"""Request and response bodies, in the shapes of the LangGraph Server API that the SDK reads: the
parts they share, and runs' and approvals' (threads' are in :mod:`api.contract.threads`, the
assistants' in :mod:`api.contract.assistants`, the service's own in :mod:`api.contract.system`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from api.contract.run_unserved import refuse_unserved
from api.contract.webhook_url import WebhookUrl
from api.platform.validation import (
    MAX_ID_LENGTH,
    METADATA_MAX_BYTES,
    METADATA_MAX_DEPTH,
    check_metadata,
)

RunStatus = Literal["pending", "running", "success", "error", "interrupted", "timeout"]
StreamMode = Literal["values", "updates", "custom", "messages", "messages-tuple", "events", "debug"]
"""The LangGraph stream modes a client may name; only ``SUPPORTED_MODES`` are served."""
SUPPORTED_MODES = ("values", "updates", "custom", "messages", "messages-tuple", "events")
"""``messages``: LangGraph Server's ``messages/metadata``, ``messages/partial`` and
``messages/complete`` events; ``messages-tuple``: LangGraph's (chunk, metadata) tuples as
``messages`` events; ``events``: a subset of ``astream_events`` v2 (``api.http.messages_mode``)."""


def _supported(value: str | list[str]) -> str | list[str]:
    for mode in [value] if isinstance(value, str) else value:
        if mode not in SUPPORTED_MODES:
            raise ValueError(
                f"stream_mode {mode!r} is not supported; use {', '.join(SUPPORTED_MODES)}"
            )
    return value


_MODE_SCHEMA = {"type": "string", "enum": list(SUPPORTED_MODES)}
StreamModes = Annotated[
    StreamMode | list[StreamMode],
    AfterValidator(_supported),
    WithJsonSchema(
        {
            "anyOf": [_MODE_SCHEMA, {"type": "array", "items": _MODE_SCHEMA}],
            "description": "One stream mode or a list of them.",
        }
    ),
]
"""Parsed as any LangGraph mode, so that ``events`` or ``debug`` get a 422 that says which
are served; the OpenAPI schema lists only those."""

Metadata = Annotated[
    dict[str, Any],
    AfterValidator(check_metadata),
    Field(
        description=f"Any JSON object, at most {METADATA_MAX_DEPTH} levels deep and "
        f"{METADATA_MAX_BYTES} bytes as compact JSON."
    ),
]
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]


class Strict(BaseModel):
    """A request body: a field this server does not know is a 422 that names it, never ignored
    (a client that misspells ``metadata`` learns it at once, not from a missing filter)."""

    model_config = ConfigDict(extra="forbid")


NO_EXIT = (
    "'exit' is not supported: threadline checkpoints every step before the next (sync), so "
    "that a run taken over after a crash continues where it was; send 'sync' or 'async' (which "
    "runs as sync), or leave it out"
)
NO_CHECKPOINT_DURING = (
    "checkpoint_during false ('exit' durability) is not supported: threadline checkpoints "
    "every step before the next, so that a run taken over after a crash continues where it "
    "was; leave it out"
)


class RunConfig(BaseModel):
    """The parts of a run's ``config`` the service reads; other keys pass through to the graph."""

    model_config = ConfigDict(extra="allow")

    configurable: dict[str, Any] | None = None
    metadata: Metadata | None = None
    tags: list[str] | None = None
    recursion_limit: int | None = Field(None, ge=1, le=100_000)
    max_concurrency: int | None = Field(None, ge=1, le=10_000)
    run_name: str | None = None
    callbacks: None = None
    """Callbacks are objects in the server's process; a client cannot send one."""


def _config(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        RunConfig.model_validate(value)
    return value  # stored as sent


_CONFIG_SCHEMA = RunConfig.model_json_schema()
_CONFIG_SCHEMA.pop("$defs", None)


class CommandBody(Strict):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCheckpoint(Strict):
    """A checkpoint of the run's thread to start from, as the SDK names one."""

    checkpoint_id: Id
    checkpoint_ns: str = Field("", max_length=MAX_ID_LENGTH)
    thread_id: Id | None = None
    checkpoint_map: dict[str, Any] | None = None
    """Sent back by SDKs from a state they read; the checkpoint id alone names the checkpoint."""


NodeNames = Annotated[
    Literal["*"]
    | Annotated[list[Annotated[str, Field(max_length=MAX_ID_LENGTH)]], Field(max_length=1000)]
    | None,
    Field(description='Node names of the graph, or "*" for every node.'),
]


class RunCreate(BaseModel):
    """Run-create body (``POST /threads/{thread_id}/runs``, ``/runs/stream``, ``/runs/wait``).

    A field this server does not know is a 422 that names it, never ignored. The SDKs' fields
    it does not serve (``after_seconds``, ``feedback_keys``) are refused when set, with the
    reason (``api.contract.run_unserved``)."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: Id
    input: Any = None
    """Graph input; ``null`` continues the thread from its last checkpoint."""
    command: CommandBody | None = None
    stream_mode: StreamModes = "values"
    durability: Annotated[
        Literal["sync", "async"] | None,
        WithJsonSchema(
            {
                "anyOf": [{"type": "string", "enum": ["sync", "async"]}, {"type": "null"}],
                "description": "Accepted as LangGraph Server's parameter; every run here is "
                "checkpointed at each step before the next one (sync), which is what a takeover "
                "continues from. 'exit' (a checkpoint only at the end) is refused.",
            }
        ),
    ] = None
    stream_subgraphs: bool = False
    """Stream the subgraphs' events too, named ``<mode>|<namespace>`` (``updates|child:<task
    id>``), stored and replayed like the graph's own."""
    config: Annotated[
        dict[str, Any] | None,
        AfterValidator(_config),
        WithJsonSchema({"anyOf": [_CONFIG_SCHEMA, {"type": "null"}]}),
    ] = None
    context: dict[str, Any] | None = None
    """The graph's static context (``Runtime.context``), mirrored into ``configurable``
    (``api.engine.run_context``); not together with a non-empty ``config.configurable``."""
    metadata: Metadata = Field(default_factory=dict)
    multitask_strategy: Annotated[
        Literal["reject", "enqueue", "interrupt", "rollback"],
        WithJsonSchema(
            {
                "type": "string",
                "enum": ["reject", "enqueue", "interrupt", "rollback"],
                "description": "While a run is active: 409 (reject), queue behind it "
                "(enqueue), cancel it and queue behind it (interrupt), or cancel it, remove "
                "it and its checkpoints once it stopped, and queue behind it (rollback).",
            }
        ),
    ] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    if_not_exists: Literal["reject", "create"] = "reject"
    interrupt_before: NodeNames = None
    """Pause before these nodes run (LangGraph's static breakpoints); checked against the graph."""
    interrupt_after: NodeNames = None
    """Pause after these nodes ran."""
    on_completion: Literal["delete", "keep"] = "delete"
    """Threadless runs (``POST /runs``): remove the thread created for the run once it ended
    (``delete``) or keep it; ignored for a thread's runs."""
    checkpoint: RunCheckpoint | None = None
    """Start from this checkpoint of the thread instead of its latest (a fork: the UI's
    regenerate and edit-message). A resume must name the latest one (or none)."""
    checkpoint_id: Id | None = None
    """The same as ``checkpoint`` with only its id."""

    @field_validator("durability", mode="before")
    @classmethod
    def no_exit_durability(cls, value: Any) -> Any:
        if value == "exit":
            raise ValueError(NO_EXIT)
        return value

    stream_resumable: bool | None = None
    """Accepted (the SDKs' flag): every stream here can be resumed with ``Last-Event-ID``."""
    checkpoint_during: bool | None = None
    """LangGraph's older name for ``durability``: ``false`` (``exit``) is refused."""
    strict_resume: bool | None = None
    """Accepted as ``true`` (the SDKs' flag): a resume that answers no waiting interrupt is
    always refused here (409, before the run is created)."""
    webhook: WebhookUrl | None = None
    """POSTed the run when it ends (``api.engine.webhooks``); its host is checked
    (``api.contract.webhook_url``)."""
    after_seconds: Any = None
    feedback_keys: Any = None
    langsmith_tracer: Any = None

    @model_validator(mode="after")
    def unserved_fields(self) -> RunCreate:
        refuse_unserved(self.after_seconds, self.feedback_keys, self.langsmith_tracer)
        if self.strict_resume is False:
            raise ValueError(
                "strict_resume false is not supported: a resume that answers no waiting "
                "interrupt is always refused (409); leave it out"
            )
        if self.checkpoint_during is False:
            raise ValueError(NO_CHECKPOINT_DURING)
        return self

    @model_validator(mode="after")
    def one_kind_of_input(self) -> RunCreate:
        if self.command is not None and self.input == {}:
            self.input = None  # useStream sends an empty input beside a command: none
        if self.checkpoint is None and self.checkpoint_id is not None:
            self.checkpoint = RunCheckpoint(checkpoint_id=self.checkpoint_id)
        if self.input is not None and self.command is not None:
            raise ValueError("send either 'input' or 'command', not both")
        return self

    def modes(self) -> list[str]:
        return [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode)


class Run(BaseModel):  # type: ignore[no-redef]  # a field named "kwargs", as in the SDK
    run_id: str
    thread_id: str
    assistant_id: str
    created_at: str
    updated_at: str
    status: RunStatus
    metadata: dict[str, Any]
    multitask_strategy: str
    kwargs: dict[str, Any]
    attempt: int
    handbacks: int = 0
    """Attempts handed back by a shutting-down server; they do not count toward the limit."""
    error: str | None = None


class AuditEntry(BaseModel):
    id: int
    run_id: str | None
    kind: str
    tool: str | None
    tool_call_id: str | None
    idempotency_key: str | None
    attempt: int | None
    detail: Any
    actor: str | None
    created_at: str
