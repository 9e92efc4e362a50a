"""Threads beyond create/get/search: count, the state at a checkpoint, state updates and copies.

A state update goes through the graph's adapter (the built-in agent takes only messages, written
as its ``agent`` node) and is refused (409) while the thread has an active run: the thread's row
stays locked during the update, so no run starts meanwhile. A copy is a new thread owned by the
caller with every checkpoint of the source (and, for the built-in agent, its workspace).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from fastapi import APIRouter
from langgraph.errors import InvalidUpdateError

from api.auth.context import caller
from api.contract.threads import (
    CheckpointRef,
    StateAt,
    StateUpdate,
    StateUpdated,
    Thread,
    ThreadCount,
    ThreadStateSelected,
)
from api.http.checked_route import CheckedRoute, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.http.json_response import json_answer
from api.http.routes.threads import SelectQuery, state_out
from api.http.state_select import selected
from api.platform.errors import Conflict, Invalid, NotFound
from api.platform.validation import MAX_ID_LENGTH
from api.store import runs, threads
from api.store.checkpoint_tables import history

router = APIRouter(tags=["threads"], route_class=CheckedRoute)


def checkpoint_config(svc: Any, thread_id: str, ref: CheckpointRef | None) -> Any:
    """The config naming ``ref`` on this thread (the thread in the path wins over the ref's)."""
    found = ref.model_dump(exclude_none=True) if ref else {}
    found.pop("thread_id", None)
    return svc.thread_config(thread_id, found)


async def existing(svc: Any, thread_id: str, config: Any) -> None:
    """404 unless the config's checkpoint is one of the thread's."""
    checkpoint_id = config["configurable"].get("checkpoint_id")
    if checkpoint_id and await svc.runtime.saver.aget_tuple(config) is None:
        raise NotFound(
            f"No checkpoint {checkpoint_id!r} on thread {thread_id!r}. "
            "POST /threads/{thread_id}/history lists its checkpoints."
        )


async def state_at(
    svc: Any, thread_id: str, config: Any, subgraphs: bool, select: list[str] | None
) -> Any:
    await svc.thread(thread_id, values=False)
    graph = svc.graph(await svc.assistant_of(thread_id))
    await existing(svc, thread_id, config)
    try:
        state = selected(state_out(await graph.aget_state(config, subgraphs=subgraphs)), select)
    except ValueError as err:  # e.g. a namespace that names no subgraph
        raise Invalid(f"Invalid request: checkpoint: {err}") from None
    return json_answer(state)


@router.post("/threads/count", response_model=int, responses=responses(413, 422))
async def count_threads(svc: ServiceDep, body: ThreadCount | None = None) -> int:
    """How many threads ``POST /threads/search`` would find (same filters, same scope)."""
    return await svc.count_threads(body or ThreadCount())


@router.get(
    "/threads/{thread_id}/state/{checkpoint_id}",
    responses={200: {"model": ThreadStateSelected}, **responses(404, 422)},
)
async def get_state_at(
    thread_id: ThreadId,
    checkpoint_id: str,
    svc: ServiceDep,
    subgraphs: bool = False,
    select: SelectQuery = None,
) -> Any:
    """The state at one of the thread's checkpoints (404 for an unknown id)."""
    if not 1 <= len(checkpoint_id) <= MAX_ID_LENGTH:
        raise Invalid(f"Invalid request: checkpoint_id is 1 to {MAX_ID_LENGTH} characters.")
    ref = CheckpointRef(checkpoint_id=checkpoint_id)
    config = checkpoint_config(svc, thread_id, ref)
    return await state_at(svc, thread_id, config, subgraphs, select)


@router.post(
    "/threads/{thread_id}/state/checkpoint",
    responses={200: {"model": ThreadStateSelected}, **responses(404, 413, 422)},
)
async def post_state_at(thread_id: ThreadId, body: StateAt, svc: ServiceDep) -> Any:
    """The state at the checkpoint the SDK names (``{"checkpoint_id": ..., "checkpoint_ns":
    ...}``; without an id, the latest)."""
    config = checkpoint_config(svc, thread_id, body.checkpoint)
    return await state_at(svc, thread_id, config, body.subgraphs, body.select)


@router.post(
    "/threads/{thread_id}/state",
    response_model=StateUpdated,
    responses=responses(404, 409, 413, 422),
)
async def update_state(thread_id: ThreadId, body: StateUpdate, svc: ServiceDep) -> Any:
    """``graph.update_state(values, as_node)`` on the latest checkpoint, or forked from
    ``checkpoint``; returns the new checkpoint. 409 while a run is active."""
    await svc.thread(thread_id, "update", values=False)
    assistant_id = await svc.assistant_of(thread_id)
    graph = svc.graph(assistant_id)
    as_node = svc.runtime.adapter(assistant_id).check_state_update(body.values, body.as_node)
    ref = body.checkpoint or (
        CheckpointRef(checkpoint_id=body.checkpoint_id) if body.checkpoint_id else None
    )
    config = checkpoint_config(svc, thread_id, ref)
    await existing(svc, thread_id, config)
    async with svc.pool.connection() as conn, conn.transaction():
        active = await runs.lock_thread(conn, thread_id)  # no run starts until this commits
        if active is None:
            raise NotFound(f"No thread {thread_id!r}. Create it with POST /threads first.")
        if active:
            raise Conflict(
                f"Thread {thread_id!r} has an active run ({active[0]['run_id']}); wait for it "
                "to end or cancel it, then update the state."
            )
        try:
            saved = await graph.aupdate_state(config, body.values, as_node=as_node)
        except (InvalidUpdateError, ValueError, TypeError, KeyError) as err:
            raise Invalid(f"Invalid request: the state update was refused: {err}") from None
        state = await graph.aget_state(saved)
        await threads.refresh_from_state(conn, thread_id, state)
    c = saved["configurable"]
    return {
        "checkpoint": {
            "thread_id": thread_id,
            "checkpoint_ns": c.get("checkpoint_ns", ""),
            "checkpoint_id": c.get("checkpoint_id"),
        }
    }


@router.post("/threads/{thread_id}/copy", response_model=Thread, responses=responses(404, 409, 422))
async def copy_thread(thread_id: ThreadId, svc: ServiceDep) -> Any:
    """A new thread (new id, owned by the caller) with the source's metadata, values and every
    checkpoint; the built-in agent's workspace is copied too. 409 while a run is active."""
    source = await svc.thread(thread_id)
    target = str(uuid.uuid4())
    value: dict[str, Any] = {
        "thread_id": target,
        "metadata": dict(source["metadata"]),
        "if_exists": "raise",
    }
    await svc.scope("create", value)
    async with svc.pool.connection() as conn, conn.transaction():
        active = await runs.lock_thread(conn, thread_id)
        if active is None:
            raise NotFound(f"No thread {thread_id!r}. Create it with POST /threads first.")
        if active:
            raise Conflict(
                f"Thread {thread_id!r} has an active run ({active[0]['run_id']}); copy it once "
                "the run ends."
            )
        owner = svc.access.owner_of_new(caller())
        copied = await threads.copy(conn, thread_id, target, value.get("metadata") or {}, owner)
        if copied is None:
            raise Conflict("The new thread's id was taken; copy again.")
        await history.copy_thread(conn, thread_id, target)
    for adapter in svc.runtime.adapters.values():  # the built-in agent's workspace
        await asyncio.to_thread(adapter.thread_copied, thread_id, target)
    return await svc.thread(target)
