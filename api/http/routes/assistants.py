"""Assistants, as LangGraph Server serves them: stored and versioned
(``api.runs.assistant_service``),
one default per served graph. Wherever an assistant id goes, a served graph's name does too
(its default assistant)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from api.contract.assistants import (
    Assistant,
    AssistantCount,
    AssistantCreate,
    AssistantPatch,
    AssistantSchemas,
    AssistantSearch,
    AssistantSelected,
    AssistantVersion,
    AssistantVersionChange,
    AssistantVersionsSearch,
)
from api.http.checked_route import AssistantId, CheckedRoute
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.platform.errors import Invalid
from api.platform.validation import MAX_ID_LENGTH
from api.project import graph_info
from api.runs import assistant_service
from api.runs.assistant_access import find
from api.store.assistants import assistant_out

router = APIRouter(tags=["assistants"], route_class=CheckedRoute)

Xray = Annotated[
    str | None,
    Query(max_length=10, description="Draw subgraphs too: true, false or a depth (1-100)."),
]
Namespace = Annotated[str, Path(min_length=1, max_length=MAX_ID_LENGTH)]
DeleteThreads = Annotated[
    bool,
    Query(description="Delete the threads whose metadata.assistant_id is this assistant too."),
]
WRITE_ERRORS = responses(400, 403, 404, 409, 413, 422)


@router.post("/assistants", response_model=Assistant, responses=WRITE_ERRORS)
async def create_assistant(body: AssistantCreate, svc: ServiceDep) -> Any:
    """A new assistant of a served graph, with its own config, context and metadata."""
    return await assistant_service.create(svc, body)


@router.post(
    "/assistants/search",
    response_model=list[AssistantSelected],
    response_model_exclude_unset=True,
    responses=responses(403, 404, 413, 422),
)
async def search_assistants(
    svc: ServiceDep, response: Response, body: AssistantSearch | None = None
) -> Any:
    """Assistants filtered by ``graph_id``, ``name`` (a case-insensitive substring) and
    ``metadata`` (containment), sorted by ``sort_by`` (default ``created_at``) in
    ``sort_order`` (default ``desc``); ``X-Pagination-Next`` is the next page's offset."""
    body = body or AssistantSearch()
    page, more = await assistant_service.search(svc, body)
    if more:
        response.headers["X-Pagination-Next"] = str(body.offset + body.limit)
    return page


@router.post("/assistants/count", response_model=int, responses=responses(403, 404, 413, 422))
async def count_assistants(svc: ServiceDep, body: AssistantCount | None = None) -> int:
    """How many assistants match the filters of ``POST /assistants/search``."""
    return await assistant_service.count(svc, body or AssistantCount())


@router.get(
    "/assistants/{assistant_id}", response_model=Assistant, responses=responses(403, 404, 422)
)
async def get_assistant(assistant_id: AssistantId, svc: ServiceDep) -> Any:
    """One assistant (a served graph's name: its default)."""
    return assistant_out(await find(svc, assistant_id))


@router.patch("/assistants/{assistant_id}", response_model=Assistant, responses=WRITE_ERRORS)
async def update_assistant(assistant_id: AssistantId, body: AssistantPatch, svc: ServiceDep) -> Any:
    """A new version of the assistant, the one it is at from now on."""
    return await assistant_service.update(svc, assistant_id, body)


@router.delete(
    "/assistants/{assistant_id}", status_code=204, responses=responses(403, 404, 409, 422)
)
async def delete_assistant(
    assistant_id: AssistantId, svc: ServiceDep, delete_threads: DeleteThreads = False
) -> Response:
    """Delete the assistant, its versions and its schedules, and cancel its active runs."""
    await assistant_service.delete(svc, assistant_id, delete_threads=delete_threads)
    return Response(status_code=204)


@router.post(
    "/assistants/{assistant_id}/versions",
    response_model=list[AssistantVersion],
    responses=responses(403, 404, 413, 422),
)
async def assistant_versions(
    assistant_id: AssistantId, svc: ServiceDep, body: AssistantVersionsSearch | None = None
) -> Any:
    """The assistant's versions, newest first (filtered by ``metadata``)."""
    return await assistant_service.versions(svc, assistant_id, body or AssistantVersionsSearch())


@router.post(
    "/assistants/{assistant_id}/latest",
    response_model=Assistant,
    responses=responses(403, 404, 413, 422),
)
async def set_latest_version(
    assistant_id: AssistantId, body: AssistantVersionChange, svc: ServiceDep
) -> Any:
    """Put the assistant back at one of its versions."""
    return await assistant_service.set_latest(svc, assistant_id, body.version)


async def _graph(svc: Any, assistant_id: str) -> tuple[str, Any]:
    row = await find(svc, assistant_id)
    return row["graph_id"], svc.graph(row["graph_id"])


@router.get("/assistants/{assistant_id}/graph", responses=responses(403, 404, 422))
async def get_assistant_graph(assistant_id: AssistantId, svc: ServiceDep, xray: Xray = None) -> Any:
    """The graph's nodes and edges (``graph.get_graph(xray=...).to_json()``)."""
    _, graph = await _graph(svc, assistant_id)
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
    return graph_info.schemas(*await _graph(svc, assistant_id))


@router.get(
    "/assistants/{assistant_id}/subgraphs",
    response_model=dict[str, AssistantSchemas],
    responses=responses(403, 404, 422),
)
async def get_assistant_subgraphs(
    assistant_id: AssistantId, svc: ServiceDep, recurse: bool = False
) -> Any:
    """Each subgraph's namespace → its schemas (``recurse``: nested ones too)."""
    graph_id, graph = await _graph(svc, assistant_id)
    return graph_info.subgraphs(graph_id, graph, None, recurse)


@router.get(
    "/assistants/{assistant_id}/subgraphs/{namespace}",
    response_model=dict[str, AssistantSchemas],
    responses=responses(403, 404, 422),
)
async def get_assistant_subgraphs_in(
    assistant_id: AssistantId, namespace: Namespace, svc: ServiceDep, recurse: bool = False
) -> Any:
    """The subgraphs under ``namespace``."""
    graph_id, graph = await _graph(svc, assistant_id)
    return graph_info.subgraphs(graph_id, graph, namespace, recurse)
