"""A2A tasks over threadline's runs: ids, states and the Task snapshot.

- ``taskId`` is ``"<thread_id>:<first run id>"`` (LangGraph Server's), ``contextId`` the thread.
  The runs that continue a task (an answer to its input request) carry ``{"a2a": {"task_id":
  ...}}`` in their metadata, its first run ``{"a2a": {"task_start": true}}``; an answer through
  another door (the approvals API, AG-UI, MCP...) continues it too; the task's state is
  its latest run's, computed by ``api.store.a2a_tasks`` (a run that stopped at an interrupt ends
  ``success``, its thread's interrupts pending: input-required; ``interrupted`` is cancelled).
- A task is found only on a thread the caller may read (``Service.thread``) and only by the
  assistant that started it: anything else is "task not found", never another tenant's.
- The snapshot: status (with the approval request as the status message of an input-required
  task, the error of a failed one), artifacts (the agent's last reply, or the ``Interrupt``
  artifact), history (the thread's user and agent messages), and its stream position in
  ``metadata.threadline`` (``run_id``, ``seq``: the latest stored event of its latest run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import Artifact, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from api.http.a2a import parts
from api.platform.errors import NotFound
from api.platform.serde import to_jsonable
from api.runs.service import Service
from api.store import a2a_tasks, events

STATES = {
    "submitted": TaskState.TASK_STATE_SUBMITTED,
    "working": TaskState.TASK_STATE_WORKING,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "canceled": TaskState.TASK_STATE_CANCELED,
    "input-required": TaskState.TASK_STATE_INPUT_REQUIRED,
}
NAMES: dict[int, str] = {v: k for k, v in STATES.items()}
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
ACTIVE = ("pending", "running")


def make_id(thread_id: str, run_id: str) -> str:
    return f"{thread_id}:{run_id}"


def state_name(run: dict[str, Any]) -> str:
    """The A2A state a run leaves its task in (``api.store.a2a_tasks`` computes it)."""
    return str(run.get("a2a_state") or "submitted")


def timestamp(iso: str | None) -> Timestamp:
    out = Timestamp()
    if iso:
        out.FromJsonString(iso)
    return out


def position(run_id: str, seq: int, part: int | None = None) -> Struct:
    """Where a streamed event (or a snapshot) is in the task's stored events: the stored event
    (``seq`` of ``run_id``) it came from, and which of that event's A2A events it is (``part``,
    when one stored event gives several); ``event_id`` is all of it as the ``Last-Event-ID``
    that resumes after it (a protobuf ``Struct`` holds numbers as doubles: ``seq`` reads 3.0)."""
    event_id = f"{run_id}:{seq}" if part is None else f"{run_id}:{seq}.{part}"
    where: dict[str, Any] = {"run_id": run_id, "seq": seq, "event_id": event_id}
    if part is not None:
        where["part"] = part
    return ParseDict({"threadline": where}, Struct())


@dataclass
class TaskRef:
    task_id: str
    thread_id: str
    runs: list[dict[str, Any]]
    """Oldest first; the first started the task."""

    @property
    def latest(self) -> dict[str, Any]:
        return self.runs[-1]

    @property
    def state(self) -> TaskState:
        return STATES[state_name(self.latest)]


def not_found(task_id: str) -> TaskNotFoundError:
    return TaskNotFoundError(
        f"No task {task_id[:200]!r} here. A task id is the one this assistant returned "
        '("<contextId>:<run id>"); ListTasks shows yours.'
    )


async def resolve(svc: Service, assistant_id: str, task_id: str) -> TaskRef:
    """The task, if the caller may see it and this assistant started it."""
    thread_id, _, run_id = task_id.rpartition(":")
    if not thread_id or not run_id:
        raise not_found(task_id)
    try:
        await svc.thread(thread_id, values=False)
    except NotFound:
        raise not_found(task_id) from None
    async with svc.pool.connection() as conn:
        found = await a2a_tasks.task_runs(conn, thread_id, run_id)
    first = found[0] if found else None
    if first is None or first["run_id"] != run_id or not _starts_task(first):
        raise not_found(task_id)
    if first["assistant_id"] != assistant_id:
        raise InvalidParamsError(
            f"Task {task_id!r} belongs to another assistant ({first['assistant_id']}): send it "
            f"to /a2a/{first['assistant_id']}."
        )
    return TaskRef(task_id, thread_id, found)


def _starts_task(run: dict[str, Any]) -> bool:
    a2a = (run.get("metadata") or {}).get("a2a")
    return isinstance(a2a, dict) and a2a.get("task_start") is True


async def thread_state(svc: Service, thread_id: str, graph_id: str) -> tuple[Any, list[Any]]:
    """The thread's values and pending interrupts (``{id, value}``), as JSON; the caller was
    checked already (or is the delivery loop)."""
    state = await svc.graph(graph_id).aget_state(svc.thread_config(thread_id))
    return to_jsonable(state.values), to_jsonable(list(state.interrupts))


def _last_reply(messages: Any) -> dict[str, Any] | None:
    for message in reversed(messages if isinstance(messages, list) else []):
        if parts.role_of(message) == Role.ROLE_USER:
            return None
        if parts.role_of(message) == Role.ROLE_AGENT and parts.text_of(message.get("content")):
            return dict(message)
    return None


async def snapshot(
    svc: Service,
    ref: TaskRef,
    *,
    history_length: int | None = None,
    state: str | None = None,
    include_artifacts: bool = True,
) -> Task:
    """The task now (``state``: as a given run's end left it, for a push notification)."""
    latest = ref.latest
    name = state or state_name(latest)
    async with svc.pool.connection() as conn:
        seq = await events.last_seq(conn, latest["run_id"])
    values, interrupts = await thread_state(svc, ref.thread_id, latest["graph_id"])
    messages = values.get("messages") if isinstance(values, dict) else None
    status = TaskStatus(state=STATES[name], timestamp=timestamp(latest["updated_at"]))
    artifacts: list[Artifact] = []
    if name == "input-required" and interrupts:
        status.message.CopyFrom(parts.input_request(interrupts, ref.task_id, ref.thread_id))
        artifacts.append(parts.interrupt_artifact(interrupts))
    elif name == "failed":
        error = latest.get("error") or "the run failed"
        status.message.CopyFrom(
            parts.agent_text(
                f"Error executing assistant: {error}",
                ref.task_id,
                ref.thread_id,
                f"{latest['run_id']}:error",
            )
        )
    elif name == "completed" and (reply := _last_reply(messages)) is not None:
        artifacts.append(parts.response_artifact(reply, latest["assistant_id"]))
    shown = parts.history(messages, ref.task_id, ref.thread_id)
    if history_length is not None:
        shown = shown[-history_length:] if history_length > 0 else []
    return Task(
        id=ref.task_id,
        context_id=ref.thread_id,
        status=status,
        artifacts=artifacts if include_artifacts else [],
        history=shown,
        metadata=position(latest["run_id"], seq),
    )
