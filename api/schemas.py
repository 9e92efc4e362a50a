"""Request and response bodies, in the shapes of the LangGraph Server API that the SDK reads."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RunStatus = Literal["pending", "running", "success", "error", "interrupted", "timeout"]
StreamMode = Literal["values", "updates", "custom", "messages", "messages-tuple", "events", "debug"]
SUPPORTED_MODES = ("values", "updates", "custom", "messages", "messages-tuple")


class Lenient(BaseModel):
    """SDK clients send fields this service does not use; they are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")


class ThreadCreate(Lenient):
    thread_id: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadPatch(Lenient):
    metadata: dict[str, Any] = Field(default_factory=dict)


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
    metadata: dict[str, Any] | None = None
    status: ThreadStatus | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    select: list[ThreadField] | None = None
    """Only these fields of each thread (the SDK's ``select``): leave ``values`` out of a list."""


class ThreadPrune(Lenient):
    """``POST /threads/prune`` (the SDK's ``client.threads.prune``)."""

    thread_ids: list[str] = Field(min_length=1, max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"


class HistoryQuery(Lenient):
    limit: int = Field(10, ge=1, le=1000)
    before: dict[str, Any] | str | None = None


class CommandBody(Lenient):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(Lenient):
    """Run-create body (``POST /threads/{thread_id}/runs``, ``/runs/stream``, ``/runs/wait``)."""

    assistant_id: str = Field(min_length=1)
    input: Any = None
    """Graph input; ``null`` continues the thread from its last checkpoint."""
    command: CommandBody | None = None
    stream_mode: StreamMode | list[StreamMode] = "values"
    config: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "reject"
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
        for mode in self.modes():
            if mode not in SUPPORTED_MODES:
                raise ValueError(
                    f"stream_mode {mode!r} is not supported; use {', '.join(SUPPORTED_MODES)}"
                )
        return self

    def modes(self) -> list[str]:
        return [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode)


class ApprovalBody(Lenient):
    interrupt_id: str = Field(min_length=1)
    decision: Literal["approve", "edit", "reject"]
    args: dict[str, Any] | None = None
    message: str | None = None
    stream_mode: StreamMode | list[StreamMode] = ["updates", "custom"]


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
