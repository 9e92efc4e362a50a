"""Request and response bodies, in the shapes of the LangGraph Server API that the SDK reads."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from api.validation import (
    MAX_ID_LENGTH,
    MAX_OFFSET,
    METADATA_MAX_BYTES,
    METADATA_MAX_DEPTH,
    THREAD_ID_PATTERN,
    THREAD_ID_RULE,
    check_metadata,
)

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RunStatus = Literal["pending", "running", "success", "error", "interrupted", "timeout"]
StreamMode = Literal["values", "updates", "custom", "messages", "messages-tuple", "events", "debug"]
"""The LangGraph stream modes a client may name; only ``SUPPORTED_MODES`` are served."""
SUPPORTED_MODES = ("values", "updates", "custom", "messages", "messages-tuple")


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
ThreadIdStr = Annotated[
    str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=THREAD_ID_PATTERN)
]
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET, description="Skip this many (0 to 2^53 - 1).")]


class Lenient(BaseModel):
    """SDK clients send fields this service does not use; they are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")


class ThreadCreate(Lenient):
    thread_id: ThreadIdStr | None = Field(None, description=f"A thread id: {THREAD_ID_RULE}.")
    metadata: Metadata = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadPatch(Lenient):
    metadata: Metadata = Field(default_factory=dict)
    """Merged into the thread's (top-level keys replace); the result keeps the same limits."""


ThreadField = Literal[
    "thread_id",
    "created_at",
    "updated_at",
    "metadata",
    "status",
    "values",
    "interrupts",
    "last_run",
]


class ThreadSearch(Lenient):
    metadata: Metadata | None = None
    status: ThreadStatus | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: Offset = 0
    select: list[ThreadField] | None = None
    """Only these fields of each thread (the SDK's ``select``): leave ``values`` out of a list."""


class ThreadPrune(Lenient):
    """``POST /threads/prune`` (the SDK's ``client.threads.prune``)."""

    thread_ids: list[ThreadIdStr] = Field(min_length=1, max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"


class CheckpointRef(Lenient):
    """A checkpoint, as the SDK names one (``checkpoint_map`` and the like are ignored)."""

    thread_id: Id | None = None
    checkpoint_ns: str = Field("", max_length=MAX_ID_LENGTH)
    checkpoint_id: Id | None = None


class HistoryQuery(Lenient):
    limit: int = Field(10, ge=1, le=1000)
    before: CheckpointRef | Id | None = None
    """Checkpoints older than this one: its id, or the checkpoint object the SDK sends."""


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


class CommandBody(Lenient):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(Lenient):
    """Run-create body (``POST /threads/{thread_id}/runs``, ``/runs/stream``, ``/runs/wait``)."""

    assistant_id: Id
    input: Any = None
    """Graph input; ``null`` continues the thread from its last checkpoint."""
    command: CommandBody | None = None
    stream_mode: StreamModes = "values"
    config: Annotated[
        dict[str, Any] | None,
        AfterValidator(_config),
        WithJsonSchema({"anyOf": [_CONFIG_SCHEMA, {"type": "null"}]}),
    ] = None
    metadata: Metadata = Field(default_factory=dict)
    multitask_strategy: Annotated[
        Literal["reject", "enqueue", "interrupt", "rollback"],
        WithJsonSchema(
            {
                "type": "string",
                "enum": ["reject", "enqueue"],
                "description": "While a run is active: 409, or queue behind it.",
            }
        ),
    ] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    if_not_exists: Literal["reject", "create"] = "reject"

    @model_validator(mode="after")
    def one_kind_of_input(self) -> RunCreate:
        if self.input is not None and self.command is not None:
            raise ValueError("send either 'input' or 'command', not both")
        if self.multitask_strategy in ("interrupt", "rollback"):
            raise ValueError(
                f"multitask_strategy {self.multitask_strategy!r} is not supported; "
                "use 'reject' (409 while a run is active) or 'enqueue'"
            )
        return self

    def modes(self) -> list[str]:
        return [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode)


class ApprovalBody(Lenient):
    interrupt_id: Id
    decision: Literal["approve", "edit", "reject"]
    args: dict[str, Any] | None = None
    message: str | None = None
    stream_mode: StreamModes = ["updates", "custom"]


class Thread(BaseModel):
    thread_id: str
    created_at: str
    updated_at: str
    metadata: dict[str, Any]
    status: ThreadStatus
    values: Any = None
    interrupts: dict[str, Any] = Field(default_factory=dict)
    last_run: dict[str, Any] | None = None
    """The latest run (id, status, attempt, error): tells a died run from a finished one."""


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


class ThreadSelected(BaseModel):
    """A thread in a search answer: with ``select``, only the fields it names."""

    thread_id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    metadata: dict[str, Any] | None = None
    status: ThreadStatus | None = None
    values: Any = None
    interrupts: dict[str, Any] | None = None
    last_run: dict[str, Any] | None = None


class CheckpointOut(BaseModel):
    thread_id: str | None
    checkpoint_ns: str | None
    checkpoint_id: str | None


class ThreadTask(BaseModel):
    id: str
    name: str
    path: list[Any]
    error: str | None
    interrupts: list[Any]
    checkpoint: Any = None
    state: Any = None
    result: Any = None


class ThreadState(BaseModel):
    """A checkpoint of the thread, in the SDK's ``ThreadState`` shape."""

    values: Any
    next: list[str]
    checkpoint: CheckpointOut | None
    metadata: Any
    created_at: str | None
    parent_checkpoint: CheckpointOut | None
    tasks: list[ThreadTask]
    interrupts: list[Any]


class PruneResult(BaseModel):
    pruned_count: int


class WorkspaceEntry(BaseModel):
    path: str
    type: Literal["file", "dir", "symlink"]
    size: int


class WorkspaceListing(BaseModel):
    files: list[WorkspaceEntry]


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
