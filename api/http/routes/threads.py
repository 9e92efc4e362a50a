"""Threads: create, get, patch, delete, search, prune, state, history."""

from __future__ import annotations

import contextlib
import uuid
from typing import Annotated, Any, cast

import orjson
from fastapi import APIRouter, Query, Response
from langgraph.types import StateSnapshot

from api.contract.thread_extract import extracted
from api.contract.thread_ttl import ThreadTTLBody
from api.contract.threads import (
    CheckpointRef,
    HistoryQuery,
    PruneResult,
    StateField,
    Thread,
    ThreadCreate,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
    ThreadSelected,
    ThreadStateSelected,
)
from api.durable.compaction import ThreadBusy, compact_thread
from api.http.checked_route import CheckedRoute, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.http.json_response import json_answer
from api.http.state_select import names_value_keys, selected
from api.platform.errors import Conflict, Invalid, NotFound
from api.platform.serde import to_jsonable
from api.runs.supersteps import apply_supersteps, graph_of
from api.store import threads
from api.store.kept_state import KeptState

router = APIRouter(tags=["threads"], route_class=CheckedRoute)

IncludeQuery = Annotated[
    str | None,
    Query(
        max_length=100,
        pattern=r"^ *(ttl)? *(, *(ttl)? *)*$",
        description="Comma-separated fields to add: ``ttl`` (the thread's time-to-live).",
    ),
]


def ttl_of(body: ThreadTTLBody | None) -> tuple[str, float] | None:
    return (body.strategy, body.ttl) if body is not None else None


SelectQuery = Annotated[
    list[StateField] | None,
    Query(
        max_length=100,
        description="Only these fields of the state, or ``values.<key>`` for one key of its "
        "values (repeat the parameter for several).",
    ),
]


def _checkpoint(config: Any) -> dict[str, Any] | None:
    if not config:
        return None
    c = config.get("configurable", {})
    return {
        "thread_id": c.get("thread_id"),
        "checkpoint_ns": c.get("checkpoint_ns", ""),
        "checkpoint_id": c.get("checkpoint_id"),
    }


def state_out(snap: StateSnapshot) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` in the SDK's ``ThreadState`` shape, for ``json_answer``
    (its values and task results are written by it, as they are)."""
    return {
        "values": snap.values,
        "next": list(snap.next),
        "checkpoint": _checkpoint(snap.config),
        "metadata": to_jsonable(snap.metadata),
        "created_at": snap.created_at,
        "parent_checkpoint": _checkpoint(snap.parent_config),
        "tasks": [
            {
                "id": t.id,
                "name": t.name,
                "path": to_jsonable(t.path),
                "error": repr(t.error) if t.error else None,
                "interrupts": to_jsonable(list(t.interrupts)),
                # A subgraph's task: its state when asked for (``subgraphs``), else where it is.
                "checkpoint": _checkpoint(t.state)
                if t.state is not None and not isinstance(t.state, StateSnapshot)
                else None,
                "state": state_out(t.state) if isinstance(t.state, StateSnapshot) else None,
                "result": t.result,
            }
            for t in snap.tasks
        ],
        "interrupts": to_jsonable(list(snap.interrupts)),
    }


def kept_out(thread_id: str, kept: KeptState) -> dict[str, Any]:
    """A state kept as the thread's values (``api.store.kept_state``) in the shape
    :func:`state_out` gives its checkpoint's snapshot: the graph ended there, so no ``next``,
    task or interrupt; the values are the stored JSON, written into the answer as they are."""

    def ref(checkpoint_id: str) -> dict[str, Any]:
        return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}

    parent = kept.parent_checkpoint_id
    return {
        "values": orjson.Fragment(kept.values_text),
        "next": [],
        "checkpoint": ref(kept.checkpoint_id),
        "metadata": kept.metadata,
        "created_at": kept.created_at,
        "parent_checkpoint": ref(parent) if parent else None,
        "tasks": [],
        "interrupts": [],
    }


@router.post("/threads", response_model=Thread, responses=responses(409, 413, 422))
async def create_thread(body: ThreadCreate, svc: ServiceDep) -> Any:
    """Create a thread (a new id unless ``thread_id`` is given); ``supersteps`` set its state
    on the graph ``metadata.graph_id`` names."""
    thread_id = body.thread_id or str(uuid.uuid4())
    graph = graph_of(svc, body.metadata, body.supersteps) if body.supersteps else None
    thread = await svc.create_thread(thread_id, body.metadata, body.if_exists, ttl_of(body.ttl))
    if graph is None or not body.supersteps:
        return thread
    await apply_supersteps(svc, graph, thread_id, body.supersteps)
    return await svc.thread(thread_id)


@router.post(
    "/threads/search",
    response_model=list[ThreadSelected],
    response_model_exclude_unset=True,
    responses=responses(413, 422),
)
async def search_threads(body: ThreadSearch, svc: ServiceDep) -> Any:
    """Threads newest first, filtered by status and metadata; ``select`` names the fields
    (each thread then has only those; without it, every field of ``Thread``)."""
    found = await svc.search_threads(body)
    out = found
    if body.select:
        fields = list(dict.fromkeys(body.select))
        out = [{k: t[k] for k in fields} for t in found]
    if body.extract:
        for whole, thread in zip(found, out, strict=True):
            thread["extracted"] = extracted(whole, body.extract)
    return out


@router.post("/threads/prune", response_model=PruneResult, responses=responses(404, 409, 413, 422))
async def prune_threads(body: ThreadPrune, svc: ServiceDep) -> dict[str, int]:
    """``delete``: delete the threads, as ``DELETE /threads/{id}`` does. ``keep_latest``: keep
    each thread and its current state, drop its older checkpoints (history starts again at the
    latest one). Ids of unknown threads are skipped; 409, and nothing pruned, if any thread has
    an active run."""
    found = []
    for thread_id in dict.fromkeys(body.thread_ids):
        with contextlib.suppress(NotFound):
            found.append(await svc.thread(thread_id, "delete"))
    busy = [t["thread_id"] for t in found if t["status"] == "busy"]
    if busy:
        raise Conflict(
            f"Threads {busy} have an active run; wait for it to end or cancel it, then prune."
        )
    pruned = 0
    for thread in found:
        thread_id = thread["thread_id"]
        if body.strategy == "delete":
            await _delete(svc, thread_id)
            pruned += 1
            continue
        graph = svc.graph(await svc.assistant_of(thread_id))
        try:
            done = await compact_thread(
                svc.pool, svc.runtime.saver, graph, thread_id, check_idle=True
            )
        except ThreadBusy:
            raise Conflict(
                f"Thread {thread_id!r} got a run while it was being pruned; "
                f"{pruned} thread(s) before it were pruned. Prune it again once the run ends."
            ) from None
        pruned += done.kept is not None
    return {"pruned_count": pruned}


@router.get("/threads/{thread_id}", response_model=Thread, responses=responses(404, 422))
async def get_thread(thread_id: ThreadId, svc: ServiceDep, include: IncludeQuery = None) -> Any:
    """One thread, with its status and latest run; ``include=ttl``: its time-to-live too."""
    fields = {f.strip() for f in (include or "").split(",")}
    return await svc.thread(thread_id, include_ttl="ttl" in fields)


@router.patch("/threads/{thread_id}", response_model=Thread, responses=responses(404, 413, 422))
async def patch_thread(thread_id: ThreadId, body: ThreadPatch, svc: ServiceDep) -> Any:
    """Merge metadata into the thread's (top-level keys replace); the merged metadata has the
    same limits as any."""
    await svc.thread(thread_id, "update", values=False)
    async with svc.pool.connection() as conn:
        try:
            found = await threads.patch(conn, thread_id, body.metadata, ttl_of(body.ttl))
        except ValueError as err:
            raise Invalid(
                f"Invalid request: metadata: merged into the thread's, {err}. "
                "Send smaller values for its keys."
            ) from None
    if found is None:
        raise NotFound(f"No thread {thread_id!r}.")
    return found


@router.delete("/threads/{thread_id}", status_code=204, responses=responses(404, 409, 422))
async def delete_thread(thread_id: ThreadId, svc: ServiceDep) -> Response:
    """Delete a thread, its runs, events, checkpoints and workspace (409 while a run is active)."""
    thread = await svc.thread(thread_id, "delete")
    if thread["status"] == "busy":
        raise Conflict(f"Thread {thread_id!r} has an active run; cancel it first.")
    await _delete(svc, thread_id)
    return Response(status_code=204)


async def _delete(svc: Any, thread_id: str) -> None:
    async with svc.pool.connection() as conn:
        await threads.delete(conn, thread_id)
    await svc.runtime.saver.adelete_thread(thread_id)
    for adapter in svc.runtime.adapters.values():  # the built-in agent's workspace
        adapter.thread_deleted(thread_id)


@router.get(
    "/threads/{thread_id}/state",
    responses={200: {"model": ThreadStateSelected}, **responses(404, 422)},
)
async def get_state(
    thread_id: ThreadId, svc: ServiceDep, subgraphs: bool = False, select: SelectQuery = None
) -> Any:
    """The current state: values, ``next``, tasks and pending interrupts; ``subgraphs``: each
    task paused in a subgraph with that subgraph's state; ``select``: only these fields."""
    if not names_value_keys(select):
        kept = await svc.kept_state(thread_id)
        if kept is not None:
            return json_answer(selected(kept_out(thread_id, kept), select))
    return json_answer(selected(state_out(await svc.state(thread_id, subgraphs=subgraphs)), select))


@router.post(
    "/threads/{thread_id}/history",
    responses={200: {"model": list[ThreadStateSelected]}, **responses(404, 413, 422)},
)
async def get_history(thread_id: ThreadId, body: HistoryQuery, svc: ServiceDep) -> Any:
    """Checkpoints, newest first: ``limit``, ``before`` one, those whose metadata contains
    ``metadata``, or only ``checkpoint``. A page from the latest starts with the state as
    ``GET /threads/{thread_id}/state`` answers it (from the thread's stored values when they
    are that checkpoint's)."""
    out = []
    limit = body.limit
    before = None
    from_latest = not (body.before or body.checkpoint or body.metadata)
    kept = None
    if from_latest and not names_value_keys(body.select):
        kept = await svc.kept_state(thread_id)  # the page's first entry: the latest checkpoint
    else:
        await svc.thread(thread_id, values=False)
    if kept is not None:
        out.append(selected(kept_out(thread_id, kept), body.select))
        limit -= 1
        ref = {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": kept.checkpoint_id}
        before = {"configurable": ref}
        if not limit:
            return json_answer(out)
    graph = svc.graph(await svc.assistant_of(thread_id))
    if isinstance(body.before, CheckpointRef):
        before = {"configurable": body.before.model_dump(exclude_none=True)}
    elif isinstance(body.before, str):
        before = {"configurable": {"thread_id": thread_id, "checkpoint_id": body.before}}
    at = body.checkpoint.model_dump(exclude_none=True) if body.checkpoint else {}
    at.pop("thread_id", None)
    try:
        async for snap in graph.aget_state_history(
            svc.thread_config(thread_id, at),
            limit=limit,
            before=cast(Any, before),
            filter=body.metadata or None,
        ):
            out.append(selected(state_out(snap), body.select))
    except ValueError as err:  # e.g. a checkpoint_ns that names no subgraph
        raise Invalid(f"Invalid request: {err}") from None
    return json_answer(out)
