"""Which assistant an id names, for whom: a served graph's name names its default assistant
(``uuid5(NAMESPACE_GRAPH, graph_id)``), any other id must be an assistant's UUID. Assistants
have owners, as threads do: with authentication each identity sees its own and the served
graphs' defaults, which no tenant may change (nor delete) for the others (403). An
``@auth.on.assistants`` handler of a ``langgraph.json`` decides instead, its filter matched
against the assistant's metadata, as on LangGraph Server. Another tenant's assistant is not
found (404)."""

from __future__ import annotations

import uuid
from typing import Any

from api.auth.access import READS
from api.auth.context import caller
from api.platform.errors import Forbidden, NotFound
from api.runs.assistant_config import RunAssistant, default_assistant_id
from api.runs.core import Core
from api.store import assistants
from api.store.assistants import Visible


def not_found(svc: Core, assistant_id: str) -> NotFound:
    return NotFound(
        f"No assistant {assistant_id[:100]!r}. Send an assistant's id (POST /assistants/search "
        f"lists them) or a served graph's name ({', '.join(sorted(svc.runtime.graphs))})."
    )


def key_of(svc: Core, assistant_id: str) -> uuid.UUID:
    """The UUID an id names (404 when it names none)."""
    if assistant_id in svc.runtime.graphs:
        return uuid.UUID(default_assistant_id(assistant_id))
    key = assistants.as_uuid(assistant_id)
    if key is None:
        raise not_found(svc, assistant_id)
    return key


async def visible(svc: Core, action: str, value: dict[str, Any]) -> Visible:
    """The assistants the caller may ``action`` (the handler may edit ``value``; 403 when it
    refuses). Without a handler: its own, and for reads the served graphs' defaults too."""
    scope = await svc.access.scope(caller(), action, value, resource="assistants")
    return Visible(owner=scope.owner, shared=action in READS, flt=scope.flt)


async def find(
    svc: Core,
    assistant_id: str,
    action: str = "read",
    value: dict[str, Any] | None = None,
    *,
    lock: Any = None,
) -> dict[str, Any]:
    """The assistant's row, if the caller may ``action`` it (404 otherwise; 403 for a served
    graph's default the caller may read but not change). ``lock``: a connection in a
    transaction, to read it on and lock it with."""
    key = key_of(svc, assistant_id)
    may = await visible(svc, action, value or {"assistant_id": str(key)})
    if lock is not None:
        row = await assistants.get(lock, key, lock=True)
    else:
        async with svc.pool.connection() as conn:
            row = await assistants.get(conn, key)
    if row is None or row["graph_id"] not in svc.runtime.graphs:
        raise not_found(svc, assistant_id)
    if may.allows(row):
        return row
    if action not in READS and row["system"] and (await visible(svc, "read", {})).allows(row):
        raise Forbidden(
            f"Assistant {key} is graph {row['graph_id']!r}'s default, which every tenant "
            "shares: no tenant changes it for the others. Create your own (POST /assistants) "
            "instead."
        )
    raise not_found(svc, assistant_id)


async def for_run(svc: Core, assistant_id: str) -> RunAssistant:
    """What a run (or a schedule) names: a served graph's default, read later (in the run's
    transaction: :func:`loaded`), or the assistant of that id, read now. As on LangGraph Server,
    a graph's default may be run by anyone who may run on the thread; another assistant needs
    the caller's read access (404)."""
    if assistant_id in svc.runtime.graphs:
        return RunAssistant.of_graph(assistant_id)
    key = key_of(svc, assistant_id)
    async with svc.pool.connection() as conn:
        row = await assistants.get(conn, key)
    if row is None or row["graph_id"] not in svc.runtime.graphs:
        raise not_found(svc, assistant_id)
    if not row["system"]:
        may = await visible(svc, "read", {"assistant_id": str(key)})
        if not may.allows(row):
            raise not_found(svc, assistant_id)
    return RunAssistant.from_row(row)


def loaded(target: RunAssistant, row: dict[str, Any] | None) -> RunAssistant:
    """A graph's default as read (``row``): 404 once deleted (start-up creates it again)."""
    if row is None:
        raise NotFound(
            f"Graph {target.graph_id!r}'s default assistant ({target.assistant_id}) was "
            "deleted; the server creates it again when it restarts. Run another assistant of "
            "the graph (POST /assistants/search lists them)."
        )
    if not row["system"] or row["graph_id"] != target.graph_id:
        # A tenant's assistant created at the id a graph's default gets (before the graph was
        # served): never what another tenant's run of the graph uses.
        raise NotFound(
            f"Graph {target.graph_id!r}'s default assistant ({target.assistant_id}) is taken by "
            "an assistant that is not the graph's default; the operator deletes it "
            "(DELETE /assistants/{id}) and restarts. Run another assistant of the graph."
        )
    return RunAssistant.from_row(row)


async def load(svc: Core, target: RunAssistant) -> RunAssistant:
    """``target`` read, if it was not yet."""
    if target.loaded:
        return target
    async with svc.pool.connection() as conn:
        row = await assistants.get(conn, uuid.UUID(target.assistant_id))
    return loaded(target, row)
