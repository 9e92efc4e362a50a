"""Assistants apart from HTTP, with LangGraph Server's semantics: creating one (of a served
graph), updating it (each update is a new version, which ``set_latest`` can go back to),
deleting it (its versions and schedules go, its active runs are cancelled, and its threads go
too when asked), searching and counting them, and the served graphs' defaults made at start-up.

What an assistant's config and context hold reaches its runs' graphs as if each run had sent it
(``api.runs.assistant_config.merged``), so it is checked as a run's would be: no reserved key, and
the graph's own checks (the built-in agent's approval rules may only tighten the server's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from api.auth.context import caller
from api.contract.assistants import (
    AssistantCount,
    AssistantCreate,
    AssistantPatch,
    AssistantSearch,
    AssistantVersionsSearch,
)
from api.engine.run_context import effective_config
from api.engine.runtime import Runtime
from api.platform.errors import Conflict, Invalid, NotFound
from api.platform.validation import check_metadata
from api.project.adapters import RunRequest, check_private_config
from api.project.graphs import graph_descriptions
from api.runs.assistant_access import find, visible
from api.runs.assistant_config import SYSTEM_METADATA, default_assistant_id, default_name, in_sync
from api.runs.core import Core
from api.store import assistants, crons, threads
from api.store.assistants import Visible, assistant_out

logger = logging.getLogger(__name__)


async def ensure_defaults(runtime: Runtime) -> None:
    """Every served graph's default assistant (``uuid5(NAMESPACE_GRAPH, graph_id)``, metadata
    ``{"created_by": "system"}``, the ``description`` its ``langgraph.json`` entry gives), made
    once across replicas; one that exists is kept."""
    config = runtime.settings.config
    described = await asyncio.to_thread(graph_descriptions, config) if config else {}
    async with runtime.pool.connection() as conn:
        for graph_id, graph in sorted(runtime.graphs.items()):
            values = {
                "graph_id": graph_id,
                "name": default_name(graph_id, graph),
                "description": described.get(graph_id),
                "config": {},
                "context": {},
                "metadata": dict(SYSTEM_METADATA),
            }
            key = uuid.UUID(default_assistant_id(graph_id))
            if not await assistants.ensure_default(conn, key, values):
                logger.error(
                    "graph %r has no default assistant: its id %s is taken by a tenant's "
                    "assistant, which runs of the graph by name will not use; delete it "
                    "(DELETE /assistants/%s) and restart",
                    graph_id,
                    key,
                    key,
                )


def _served(svc: Core, graph_id: str) -> None:
    if graph_id not in svc.runtime.graphs:
        raise NotFound(
            f"Graph {graph_id[:100]!r} is not served. Served graphs: "
            f"{', '.join(sorted(svc.runtime.graphs))}."
        )


async def _checked(svc: Core, graph_id: str, config: Any, context: Any) -> None:
    """An assistant's config and context, checked as a run that sent them is (422, 403)."""
    seen = effective_config(config, context)
    check_private_config(seen)

    async def nothing_pending() -> list[Any]:
        return []

    request = RunRequest(
        thread_id="", input=None, command=None, config=seen, thread=None, pending=nothing_pending
    )
    await svc.runtime.adapter(graph_id).check_run(request)


async def create(svc: Core, body: AssistantCreate) -> dict[str, Any]:
    """A new assistant (version 1); an id taken is a 409, or the caller's assistant with
    ``if_exists: do_nothing``."""
    key = uuid.uuid4()
    if body.assistant_id is not None:
        found = assistants.as_uuid(body.assistant_id)
        if found is None:
            raise Invalid("Invalid assistant_id: it is a UUID; leave it out for a new one.")
        key = found
    _served(svc, body.graph_id)
    config, context = in_sync(dict(body.config), body.context)
    value: dict[str, Any] = {
        "assistant_id": str(key),
        "graph_id": body.graph_id,
        "config": config,
        "context": context or {},
        "metadata": dict(body.metadata),
        "if_exists": body.if_exists,
        "name": body.name,
    }
    may = await visible(svc, "create", value)  # the handler may add metadata (an owner)
    await _checked(svc, body.graph_id, config, context)
    values = {
        "graph_id": body.graph_id,
        "name": body.name,
        "description": body.description,
        "config": config,
        "context": context or {},
        "metadata": value.get("metadata") or {},
    }
    async with svc.pool.connection() as conn:
        row = await assistants.insert(conn, key, values, owner=svc.access.owner_of_new(caller()))
        if row is None and body.if_exists == "do_nothing":
            row = await assistants.get(conn, key)
            readable = await visible(svc, "read", {"assistant_id": str(key)})
            # Another tenant's is taken, not shown (nor one the create handler's filter fails).
            if row is not None and readable.allows(row) and Visible(flt=may.flt).allows(row):
                return assistant_out(row)
        elif row is not None:
            return assistant_out(row)
    raise Conflict(
        f"Assistant {key} already exists. Use it, leave assistant_id out for a new one, or "
        'send "if_exists": "do_nothing".'
    )


async def update(svc: Core, assistant_id: str, body: AssistantPatch) -> dict[str, Any]:
    """A new version: what the body leaves out is kept (a config or a context given replaces
    the assistant's, each mirroring the other), ``metadata`` is merged into the assistant's."""
    if body.graph_id is not None:
        _served(svc, body.graph_id)
    config, context = in_sync(dict(body.config or {}), body.context)
    value: dict[str, Any] = {
        "assistant_id": assistant_id,
        "graph_id": body.graph_id,
        "config": config,
        "context": context,
        "metadata": dict(body.metadata or {}),
        "name": body.name,
    }
    async with svc.pool.connection() as conn, conn.transaction():
        row = await find(svc, assistant_id, "update", value, lock=conn)
        metadata: dict[str, Any] = {**row["metadata"], **(value.get("metadata") or {})}
        try:
            check_metadata(metadata)
        except ValueError as err:
            problem = f"metadata: merged into the assistant's, {err}."
            raise Invalid(f"Invalid request: {problem}") from None
        graph_id: str = body.graph_id or row["graph_id"]
        new = {
            "graph_id": graph_id,
            "name": body.name or row["name"],
            "description": row["description"] if body.description is None else body.description,
            "config": config or row["config"],
            "context": row["context"] if context is None else context,
            "metadata": metadata,
        }
        await _checked(svc, graph_id, new["config"], new["context"])
        return assistant_out(await assistants.add_version(conn, row["assistant_id"], new))


async def set_latest(svc: Core, assistant_id: str, version: int) -> dict[str, Any]:
    """The assistant back at one of its versions (its runs get that version's values)."""
    value = {"assistant_id": assistant_id, "version": version}
    async with svc.pool.connection() as conn, conn.transaction():
        row = await find(svc, assistant_id, "update", value, lock=conn)
        found = await assistants.set_latest(conn, row["assistant_id"], version)
    if found is None:
        raise NotFound(
            f"Assistant {row['assistant_id']} has no version {version}. "
            f"POST /assistants/{row['assistant_id']}/versions lists its versions."
        )
    return assistant_out(found)


async def versions(
    svc: Core, assistant_id: str, body: AssistantVersionsSearch
) -> list[dict[str, Any]]:
    """Its versions, newest first; none matching is a 404, as on LangGraph Server."""
    row = await find(svc, assistant_id, "read")
    async with svc.pool.connection() as conn:
        found = await assistants.versions(
            conn, row["assistant_id"], body.metadata or {}, body.limit, body.offset
        )
    if not found:
        raise NotFound(
            f"No version of assistant {row['assistant_id']} matches (metadata, offset); "
            "send no filter for all of them."
        )
    return found


async def delete(svc: Core, assistant_id: str, *, delete_threads: bool) -> None:
    """As on LangGraph Server: its versions and schedules go with it and its active runs are
    cancelled (their rows stay, with the thread's history); ``delete_threads``: the threads its
    runs labelled (``metadata.assistant_id``) that the caller may delete go too, with their
    runs. A thread with an active run is a 409 before anything is deleted."""
    row = await find(svc, assistant_id, "delete")
    key = str(row["assistant_id"])
    names = [key] + ([row["graph_id"]] if row["system"] else [])  # older runs named the graph
    doomed = []
    if delete_threads:
        async with svc.pool.connection() as conn:
            labelled = await assistants.labelled_threads(conn, key)
        for thread_id in labelled:
            try:
                thread = await svc.thread(thread_id, "delete")
            except NotFound:
                continue  # not the caller's to delete: kept, as LangGraph Server skips it
            if thread["status"] == "busy":
                raise Conflict(
                    f"Thread {thread_id!r} of assistant {key} has an active run; cancel it "
                    "first, or delete the assistant without delete_threads."
                )
            doomed.append(thread_id)
    for thread_id in doomed:
        async with svc.pool.connection() as conn:
            await threads.delete(conn, thread_id)
        await svc.runtime.saver.adelete_thread(thread_id)
        for adapter in svc.runtime.adapters.values():  # the built-in agent's workspace
            adapter.thread_deleted(thread_id)
    async with svc.pool.connection() as conn:
        active = await assistants.active_runs(conn, names)
    for run in active:  # one that ended meanwhile, or on a thread the caller may not change: left
        with contextlib.suppress(NotFound, Conflict):
            await svc.cancel(run["thread_id"], run["run_id"])
    async with svc.pool.connection() as conn, conn.transaction():
        await crons.delete_for_assistant(conn, names)
        await assistants.delete(conn, row["assistant_id"])


def _filters(svc: Core, body: AssistantSearch | AssistantCount) -> dict[str, Any]:
    if body.graph_id is not None:
        _served(svc, body.graph_id)
    return {"graph_id": body.graph_id, "metadata": body.metadata or {}}


async def search(svc: Core, body: AssistantSearch) -> tuple[list[dict[str, Any]], bool]:
    """A page of the caller's assistants (and the served graphs' defaults), and whether there
    is a next one."""
    value = {**_filters(svc, body), "limit": body.limit, "offset": body.offset}
    may = await visible(svc, "search", value)
    async with svc.pool.connection() as conn:
        found = await assistants.search(
            conn,
            may,
            sorted(svc.runtime.graphs),
            {**value, "name": body.name},
            sort_by=body.sort_by or "created_at",
            descending=(body.sort_order or "desc") == "desc",
            limit=body.limit,
            offset=body.offset,
        )
    page = found[: body.limit]
    if body.select:
        fields = list(dict.fromkeys(body.select))
        page = [{k: a[k] for k in fields} for a in page]
    return page, len(found) > body.limit


async def count(svc: Core, body: AssistantCount) -> int:
    """How many assistants ``search`` would find with the same filters."""
    value = _filters(svc, body)
    may = await visible(svc, "search", {**value, "limit": 0, "offset": 0})
    async with svc.pool.connection() as conn:
        return await assistants.count(
            conn, may, sorted(svc.runtime.graphs), {**value, "name": body.name}
        )
