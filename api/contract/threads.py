"""Thread bodies: creating, patching, searching and pruning threads, their state and history
(checkpoints), and the listing of a thread's workspace, in the shapes of the LangGraph Server
API that the SDK reads (the parts every body shares are in :mod:`api.contract.runs`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from api.contract.runs import CommandBody, Id, Metadata, Strict
from api.contract.thread_extract import check_extract
from api.contract.thread_ttl import ThreadTTLBody, ThreadTTLInfo
from api.platform.validation import MAX_ID_LENGTH, MAX_OFFSET, THREAD_ID_PATTERN, THREAD_ID_RULE

STATE_FIELD_PATTERN = (
    r"^(values|next|tasks|checkpoint|metadata|created_at|parent_checkpoint|interrupts"
    r"|values\.[^.]+)$"
)
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
ThreadIdStr = Annotated[
    str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=THREAD_ID_PATTERN)
]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET, description="Skip this many (0 to 2^53 - 1).")]


class SuperstepUpdate(Strict):
    """One update of a superstep: ``values`` (or a ``command``) written as ``as_node``."""

    values: dict[str, Any] | list[Any] | None = None
    command: CommandBody | None = None
    as_node: Id


class Superstep(Strict):
    updates: list[SuperstepUpdate] = Field(min_length=1, max_length=100)


class ThreadCreate(Strict):
    thread_id: ThreadIdStr | None = Field(None, description=f"A thread id: {THREAD_ID_RULE}.")
    metadata: Metadata = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    supersteps: list[Superstep] | None = Field(None, max_length=100)
    """State to start the new thread with: each superstep's updates applied as
    ``graph.bulk_update_state`` does, on the graph its ``metadata.graph_id`` names."""
    ttl: ThreadTTLBody | None = None
    """Its time-to-live; none: the server's default (``checkpointer.ttl.default_ttl``)."""


class ThreadPatch(Strict):
    metadata: Metadata = Field(default_factory=dict)
    """Merged into the thread's (top-level keys replace); the result keeps the same limits."""
    ttl: ThreadTTLBody | None = None
    """A new time-to-live, counting from now."""


ThreadSortBy = Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"]
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


class ThreadSearch(Strict):
    metadata: Metadata | None = None
    status: ThreadStatus | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: Offset = 0
    select: list[ThreadField] | None = None
    """Only these fields of each thread (the SDK's ``select``): leave ``values`` out of a list."""
    values: Metadata | None = None
    """Threads whose last known values contain these."""
    ids: list[ThreadIdStr] | None = Field(None, max_length=1000)
    """Only these threads."""
    sort_by: ThreadSortBy | None = None
    """Default ``created_at`` (``state_updated_at`` sorts by ``updated_at``)."""
    sort_order: Literal["asc", "desc"] | None = None
    """Default ``desc``."""
    extract: dict[str, str] | None = None
    """Alias → path (``values.messages[-1].content``): each thread gets ``extracted``, the
    values those paths name (``api.contract.thread_extract``)."""

    @field_validator("extract")
    @classmethod
    def paths(cls, extract: dict[str, str] | None) -> dict[str, str] | None:
        if extract and (wrong := check_extract(extract)):
            raise ValueError("; ".join(wrong))
        return extract


class ThreadCount(Strict):
    """``POST /threads/count``: the filters of ``POST /threads/search``."""

    metadata: Metadata | None = None
    values: Metadata | None = None
    status: ThreadStatus | None = None


class ThreadPrune(Strict):
    """``POST /threads/prune`` (the SDK's ``client.threads.prune``)."""

    thread_ids: list[ThreadIdStr] = Field(min_length=1, max_length=1000)
    strategy: Literal["delete", "keep_latest"] = "delete"


class CheckpointRef(Strict):
    """A checkpoint, as the SDK names one."""

    thread_id: Id | None = None
    checkpoint_ns: str = Field("", max_length=MAX_ID_LENGTH)
    checkpoint_id: Id | None = None
    checkpoint_map: dict[str, Any] | None = None
    """Sent back by SDKs from a state they read; the id and namespace name the checkpoint."""


StateField = Annotated[str, Field(pattern=STATE_FIELD_PATTERN, max_length=MAX_ID_LENGTH)]
StateSelect = Annotated[
    list[StateField] | None,
    Field(
        max_length=100,
        description="Only these fields of each state (``values``, ``next``, ``tasks``, "
        "``checkpoint``, ``metadata``, ``created_at``, ``parent_checkpoint``, ``interrupts``), "
        "or ``values.<key>`` for one key of its values.",
    ),
]


class HistoryQuery(Strict):
    limit: int = Field(10, ge=1, le=1000)
    before: CheckpointRef | Id | None = None
    """Checkpoints older than this one: its id, or the checkpoint object the SDK sends."""
    metadata: Metadata | None = None
    """Checkpoints whose metadata contains this (``{"source": "update"}``, ``{"step": 2}``)."""
    checkpoint: CheckpointRef | None = None
    """This checkpoint only (LangGraph's ``config`` of the history: an exact checkpoint id;
    without an id, the namespace's checkpoints)."""
    select: StateSelect = None


class StateAt(Strict):
    """``POST /threads/{id}/state/checkpoint``: the state at this checkpoint."""

    checkpoint: CheckpointRef
    subgraphs: bool = False
    select: StateSelect = None


class StateUpdate(Strict):
    """``POST /threads/{id}/state``: ``graph.update_state`` as LangGraph Server does it."""

    values: dict[str, Any] | list[Any] | None = None
    as_node: Id | None = None
    """The node the update is written as (what runs next follows from it)."""
    checkpoint: CheckpointRef | None = None
    """Fork from this checkpoint instead of the latest."""
    checkpoint_id: Id | None = None
    """The same, by id only (the SDKs' deprecated form)."""


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
    ttl: ThreadTTLInfo | None = Field(None, exclude_if=lambda ttl: ttl is None)
    """Its time-to-live, with ``?include=ttl`` when it has one."""


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
    extracted: dict[str, Any] | None = None
    """The values of the search's ``extract`` paths, by alias."""


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


class ThreadStateSelected(BaseModel):
    """A ``ThreadState`` trimmed by ``select``: only the fields it names (all without it)."""

    values: Any = None
    next: list[str] | None = None
    checkpoint: CheckpointOut | None = None
    metadata: Any = None
    created_at: str | None = None
    parent_checkpoint: CheckpointOut | None = None
    tasks: list[ThreadTask] | None = None
    interrupts: list[Any] | None = None


class PruneResult(BaseModel):
    pruned_count: int


class WorkspaceEntry(BaseModel):
    path: str
    type: Literal["file", "dir", "symlink"]
    size: int


class WorkspaceListing(BaseModel):
    files: list[WorkspaceEntry]


class StateUpdated(BaseModel):
    """What ``POST /threads/{id}/state`` returns: the checkpoint it wrote."""

    checkpoint: CheckpointOut
