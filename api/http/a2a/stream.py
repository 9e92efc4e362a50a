"""A task's stream from its runs' STORED events (``api.durable.event_follow.follow``), never from
memory: the same on any replica, after a crash of the one that served the task, and again.

Each stored event becomes at most a few A2A events, every one with the event's position in
``metadata.threadline`` (``run_id``, ``seq``): ``metadata`` (an attempt starts) → status
``working``; ``updates`` → an artifact update for each AI message with text a node wrote (the
artifact id is the message's id); ``end`` → the final status update (completed, failed with the
error, canceled, or input-required with the approval request, as the run and its thread are
then). Several A2A events of one stored event are told apart by ``part`` (0, 1, ...). A reader
that resumes after ``seq`` N (and ``part`` P) of a run gets the events after that one only:
nothing twice, nothing lost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from a2a.types.a2a_pb2 import (
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from api.durable.event_follow import follow
from api.http.a2a import parts
from api.http.a2a.tasks import STATES, position, thread_state
from api.runs.service import Service
from api.store import a2a_tasks

Event = TaskStatusUpdateEvent | TaskArtifactUpdateEvent


def _messages(update: Any) -> list[Any]:
    found = update.get("messages") if isinstance(update, dict) else None
    if isinstance(found, dict):
        return [found]
    return found if isinstance(found, list) else []


async def run_events(
    svc: Service,
    task_id: str,
    run: dict[str, Any],
    *,
    after: int,
    part: int | None = None,
) -> AsyncIterator[Event]:
    """The A2A events of ``run``'s stored events after ``after``, live until its end; with
    ``part``, also those of stored event ``after`` past its ``part``-th A2A event."""
    run_id = run["run_id"]
    start = after - 1 if part is not None and after > 0 else after
    async for rows in follow(svc.pool, svc.hub, run_id, after=start):
        for row in rows:
            seq = row["seq"]
            if seq <= start:  # follow resends the end to a reader at or past it
                continue
            skip = part if seq == after and part is not None else -1
            for index, event in enumerate(_translated(task_id, run, row)):
                if index > skip:
                    yield event
            if row["event"] == "end":
                yield await final_status(svc, task_id, run, orjson.loads(row["data"]), seq)
                return


def _translated(task_id: str, run: dict[str, Any], row: dict[str, Any]) -> list[Event]:
    """The A2A events of one stored event but its end, each with its position (``part``: its
    index among them)."""
    run_id, context_id, seq = run["run_id"], run["thread_id"], row["seq"]
    name = row["event"]
    if name == "metadata":
        return [
            TaskStatusUpdateEvent(
                task_id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
                metadata=position(run_id, seq),
            )
        ]
    if name != "updates":
        return []
    data = orjson.loads(row["data"])
    found: list[Event] = []
    for update in data.values() if isinstance(data, dict) else []:
        for message in _messages(update):
            if parts.role_of(message) == Role.ROLE_AGENT and parts.text_of(message.get("content")):
                found.append(
                    TaskArtifactUpdateEvent(
                        task_id=task_id,
                        context_id=context_id,
                        artifact=parts.response_artifact(message, run["assistant_id"]),
                        append=False,
                        last_chunk=True,
                        metadata=position(run_id, seq, len(found)),
                    )
                )
    return found


async def final_status(
    svc: Service, task_id: str, run: dict[str, Any], end: Any, seq: int
) -> TaskStatusUpdateEvent:
    """The status the run's end left its task in."""
    run_id, context_id = run["run_id"], run["thread_id"]
    async with svc.pool.connection() as conn:
        name = await a2a_tasks.run_state(conn, run_id) or "failed"
    status = TaskStatus(state=STATES[name])
    if name == "input-required":
        _, interrupts = await thread_state(svc, context_id, run["graph_id"])
        if interrupts:
            status.message.CopyFrom(parts.input_request(interrupts, task_id, context_id))
    elif name == "failed":
        error = (end or {}).get("error") if isinstance(end, dict) else None
        status.message.CopyFrom(
            parts.agent_text(
                f"Error executing assistant: {error or 'the run failed'}",
                task_id,
                context_id,
                f"{run_id}:error",
            )
        )
    return TaskStatusUpdateEvent(
        task_id=task_id, context_id=context_id, status=status, metadata=position(run_id, seq)
    )
