"""Schedules' bodies (``/runs/crons``, ``/threads/{id}/runs/crons``) in the SDKs' shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, Field, WithJsonSchema, model_validator

from api.contract.runs import (
    NO_CHECKPOINT_DURING,
    NO_EXIT,
    Id,
    Metadata,
    RunConfig,
    StreamModes,
    Strict,
)
from api.contract.webhook_url import WebhookUrl
from api.platform.validation import MAX_ID_LENGTH

Schedule = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="A cron expression, 5 fields (minute hour day-of-month month day-of-week), "
        "in `timezone` (UTC when unset).",
    ),
]
Timezone = Annotated[str, Field(min_length=1, max_length=64, description="An IANA time zone.")]
Nodes = Annotated[
    Literal["*"]
    | Annotated[list[Annotated[str, Field(max_length=MAX_ID_LENGTH)]], Field(max_length=1000)]
    | None,
    Field(description='Node names of the graph, or "*" for every node.'),
]


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("end_time needs a time zone offset (e.g. 2030-01-01T00:00:00Z)")
    return value


def _config(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        RunConfig.model_validate(value)
    return value  # stored as sent


EndTime = Annotated[datetime | None, AfterValidator(_aware)]


class CronPayload(Strict):
    """What each run of the schedule is created with (the run-create fields that apply)."""

    input: Any = None
    config: Annotated[
        dict[str, Any] | None,
        AfterValidator(_config),
        WithJsonSchema({"anyOf": [{"type": "object"}, {"type": "null"}]}),
    ] = None
    context: dict[str, Any] | None = None
    metadata: Metadata | None = None
    interrupt_before: Nodes = None
    interrupt_after: Nodes = None
    stream_mode: StreamModes | None = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    checkpoint_during: bool | None = None
    webhook: WebhookUrl | None = None
    """POSTed each run when it ends, as a run's ``webhook``."""

    @model_validator(mode="after")
    def every_step_checkpointed(self) -> Self:
        """As for a run (``api.contract.runs.RunCreate``): ``exit`` durability is refused."""
        if self.durability == "exit":
            raise ValueError(NO_EXIT)
        if self.checkpoint_during is False:
            raise ValueError(NO_CHECKPOINT_DURING)
        return self


class CronCreate(CronPayload):
    assistant_id: Id
    schedule: Schedule
    timezone: Timezone | None = None
    end_time: EndTime = None
    enabled: bool = True
    multitask_strategy: Literal["reject", "enqueue"] = Field(
        "enqueue",
        description="A thread-bound schedule whose thread is busy at a due time: `enqueue` "
        "(default) queues the run behind the active one; `reject` skips that due time.",
    )
    on_run_completed: Literal["delete", "keep"] = Field(
        "delete",
        description="A threadless schedule's thread after each run: removed once it ended "
        "(as LangGraph does; `api.engine.ephemeral`), or kept.",
    )


class CronUpdate(CronPayload):
    """``PATCH /runs/crons/{cron_id}``: the fields sent replace the schedule's."""

    schedule: Schedule | None = None
    timezone: Timezone | None = None
    end_time: EndTime = None
    enabled: bool | None = None
    on_run_completed: Literal["delete", "keep"] | None = None


CronSortBy = Literal[
    "cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"
]
CronField = Literal[
    "cron_id",
    "assistant_id",
    "thread_id",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "now",
    "on_run_completed",
    "enabled",
]


class CronCount(Strict):
    assistant_id: Id | None = None
    thread_id: Id | None = None
    metadata: Metadata | None = None


class CronSearch(CronCount):
    enabled: bool | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=1_000_000)
    sort_by: CronSortBy = "created_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[CronField] | None = Field(None, max_length=20)


class Cron(BaseModel):
    cron_id: str
    assistant_id: str
    thread_id: str | None
    on_run_completed: str | None
    end_time: str | None
    schedule: str
    timezone: str | None
    created_at: str
    updated_at: str
    payload: dict[str, Any]
    user_id: str | None
    next_run_date: str | None
    metadata: dict[str, Any]
    enabled: bool


class CronSelected(BaseModel):
    """A schedule with only the fields ``select`` named."""

    model_config = {"extra": "allow"}
