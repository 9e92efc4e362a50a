"""Assistants: the served graphs, one assistant per graph (``assistant_id`` = ``graph_id``).

They are made when the server starts, so ``created_at`` and ``updated_at`` are the server's start
time and ``version`` is 1; they have no description, config, context or metadata of their own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from api import graph_info
from api.deps import ServiceDep
from api.errors import Invalid, responses
from api.system_schemas import (
    Assistant,
    AssistantCount,
    AssistantSchemas,
    AssistantSearch,
    AssistantSelected,
)
from api.validation import MAX_ID_LENGTH, AssistantId, CheckedRoute

router = APIRouter(tags=["assistants"], route_class=CheckedRoute)

STARTED = datetime.now(UTC).isoformat()
"""When this server process started: when its assistants were made."""

Xray = Annotated[
    str | None,
    Query(max_length=10, description="Draw subgraphs too: true, false or a depth (1-100)."),
]
Namespace = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH)]


def assistant(graph_id: str) -> dict[str, Any]:
    return {
        "assistant_id": graph_id,
        "graph_id": graph_id,
        "name": graph_id,
        "description": None,
        "config": {},
        "context": {},
        "metadata": {},
        "version": 1,
        "created_at": STARTED,
        "updated_at": STARTED,
    }


def _matching(svc: Any, body: AssistantCount | AssistantSearch) -> list[dict[str, Any]]:
    found = [assistant(gid) for gid in sorted(svc.runtime.graphs)]
    if body.graph_id is not None:
        found = [a for a in found if a["graph_id"] == body.graph_id]
    if body.name:
        found = [a for a in found if body.name.lower() in a["name"].lower()]
    if body.metadata:  # assistants' metadata is empty: only an empty filter matches
        found = []
    return found


@router.post(
    "/assistants/search",
    response_model=list[AssistantSelected],
    response_model_exclude_unset=True,
    responses=responses(403, 413, 422),
)
async def search_assistants(
    svc: ServiceDep, response: Response, body: AssistantSearch | None = None
) -> Any:
    """The served graphs as assistants, filtered by ``graph_id``, ``name`` (a case-insensitive
    substring) and ``metadata``, sorted by ``sort_by`` (default ``created_at``) in
    ``sort_order`` (default ``desc``); ``X-Pagination-Next`` is the next page's offset."""
    body = body or AssistantSearch()
    await svc.authorize(
        "assistants",
        "search",
        {
            "graph_id": body.graph_id,
            "metadata": body.metadata or {},
            "limit": body.limit,
            "offset": body.offset,
        },
    )
    found = _matching(svc, body)
    key = body.sort_by or "created_at"
    # Ties (every assistant has the same times) keep the id order, in either direction.
    found.sort(key=lambda a: a["assistant_id"])
    found.sort(key=lambda a: a[key], reverse=(body.sort_order or "desc") == "desc")
    page = found[body.offset : body.offset + body.limit]
    if body.offset + body.limit < len(found):
        response.headers["X-Pagination-Next"] = str(body.offset + body.limit)
    if not body.select:
        return page
    fields = list(dict.fromkeys(body.select))
    return [{k: a[k] for k in fields} for a in page]


@router.post("/assistants/count", response_model=int, responses=responses(403, 413, 422))
async def count_assistants(svc: ServiceDep, body: AssistantCount | None = None) -> int:
    """How many assistants match the filters of ``POST /assistants/search``."""
    body = body or AssistantCount()
    await svc.authorize(
        "assistants", "search", {"graph_id": body.graph_id, "metadata": body.metadata or {}}
    )
    return len(_matching(svc, body))


@router.get(
    "/assistants/{assistant_id}", response_model=Assistant, responses=responses(403, 404, 422)
)
async def get_assistant(assistant_id: AssistantId, svc: ServiceDep) -> Any:
    """One served graph, as an assistant."""
    svc.graph(assistant_id)
    await svc.authorize("assistants", "read", {"assistant_id": assistant_id})
    return assistant(assistant_id)


async def _graph(svc: Any, assistant_id: str) -> Any:
    graph = svc.graph(assistant_id)
    await svc.authorize("assistants", "read", {"assistant_id": assistant_id})
    return graph


@router.get("/assistants/{assistant_id}/graph", responses=responses(403, 404, 422))
async def get_assistant_graph(assistant_id: AssistantId, svc: ServiceDep, xray: Xray = None) -> Any:
    """The graph's nodes and edges (``graph.get_graph(xray=...).to_json()``)."""
    graph = await _graph(svc, assistant_id)
    try:
        depth = graph_info.parse_xray(xray)
    except ValueError as err:
        raise Invalid(f"Invalid request: {err}.") from None
    try:
        return graph_info.drawable(graph, depth)
    except ValueError as err:
        raise Invalid(
            f"Assistant {assistant_id!r} cannot be drawn with xray={xray}: {err}. Ask without xray."
        ) from None


@router.get(
    "/assistants/{assistant_id}/schemas",
    response_model=AssistantSchemas,
    responses=responses(403, 404, 422),
)
async def get_assistant_schemas(assistant_id: AssistantId, svc: ServiceDep) -> Any:
    """JSON schemas of the graph's input, output, state, config and context (null where a schema
    cannot be generated)."""
    return graph_info.schemas(assistant_id, await _graph(svc, assistant_id))


@router.get(
    "/assistants/{assistant_id}/subgraphs",
    response_model=dict[str, AssistantSchemas],
    responses=responses(403, 404, 422),
)
async def get_assistant_subgraphs(
    assistant_id: AssistantId, svc: ServiceDep, recurse: bool = False
) -> Any:
    """Each subgraph's namespace → its schemas (``recurse``: nested ones too)."""
    graph = await _graph(svc, assistant_id)
    return graph_info.subgraphs(assistant_id, graph, None, recurse)


@router.get(
    "/assistants/{assistant_id}/subgraphs/{namespace}",
    response_model=dict[str, AssistantSchemas],
    responses=responses(403, 404, 422),
)
async def get_assistant_subgraphs_in(
    assistant_id: AssistantId, namespace: Namespace, svc: ServiceDep, recurse: bool = False
) -> Any:
    """The subgraphs under ``namespace``."""
    graph = await _graph(svc, assistant_id)
    return graph_info.subgraphs(assistant_id, graph, namespace, recurse)
