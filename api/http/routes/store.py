"""Long-term memory: ``/store`` items and namespaces, in LangGraph Server's shapes, each caller
within its own namespaces (:mod:`api.runs.memory`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from api.auth.context import caller
from api.contract.memory import (
    MAX_KEY,
    MAX_LABELS,
    MAX_NAMESPACE,
    NAMESPACE_RULE,
    Namespaces,
    SearchItems,
    StoreDelete,
    StoreItem,
    StoreListNamespaces,
    StorePut,
    StoreSearch,
    check_item_namespace,
    check_key,
    check_namespace,
)
from api.http.checked_route import CheckedRoute
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.platform.errors import Invalid, NotFound
from api.runs.memory import Memory
from api.runs.service import Service

router = APIRouter(tags=["store"], route_class=CheckedRoute)


def memory(svc: Service) -> Memory:
    store = svc.runtime.store
    if store is None:
        raise NotFound("This process has no long-term memory store.")
    from langgraph.store.postgres.aio import AsyncPostgresStore

    assert isinstance(store, AsyncPostgresStore)
    return Memory(store, svc.access, caller())


def parse_namespace(text: str) -> list[str]:
    """``a.b.c`` (what the SDKs send in the query) as labels, checked."""
    labels = text.split(".") if text else []
    try:
        if len(labels) > MAX_LABELS:
            raise ValueError(f"a namespace is {NAMESPACE_RULE}")
        check_namespace(labels)
        check_item_namespace(labels)
    except ValueError as err:
        raise Invalid(f"Invalid request: namespace: {err}.") from None
    return labels


@router.put("/store/items", status_code=204, responses=responses(403, 413, 422))
async def put_item(body: StorePut, svc: ServiceDep) -> Response:
    """Create or replace one item (the SDK's ``store.put_item``)."""
    await memory(svc).put(body)
    return Response(status_code=204)


@router.get("/store/items", response_model=StoreItem | None, responses=responses(400, 403, 422))
async def get_item(
    svc: ServiceDep,
    key: Annotated[str, Query(min_length=1, max_length=MAX_KEY, description="The item's key.")],
    namespace: Annotated[
        str,
        Query(
            max_length=MAX_NAMESPACE,
            description="The item's namespace, its labels joined with '.'.",
        ),
    ] = "",
    refresh_ttl: bool | None = None,
) -> Any:
    """One item, or ``null`` when there is none (the SDK's ``store.get_item``)."""
    try:
        check_key(key)
    except ValueError as err:
        raise Invalid(f"Invalid request: key: {err}.") from None
    return await memory(svc).get(parse_namespace(namespace), key, refresh_ttl)


@router.delete("/store/items", status_code=204, responses=responses(403, 413, 422))
async def delete_item(body: StoreDelete, svc: ServiceDep) -> Response:
    """Delete one item; deleting one that is not there is not an error."""
    await memory(svc).delete(body)
    return Response(status_code=204)


@router.post("/store/items/search", response_model=SearchItems, responses=responses(403, 413, 422))
async def search_items(body: StoreSearch, svc: ServiceDep) -> Any:
    """Items under a namespace prefix, matching ``filter`` (the SDK's ``store.search_items``).
    ``filter`` compares top-level fields of the value: ``{"kind": "note"}`` or
    ``{"score": {"$gte": 3}}``. ``query`` ranks them by similarity (each with its ``score``)
    when langgraph.json configures ``store.index``; without one it is ignored, as on LangGraph."""
    return {"items": await memory(svc).search(body)}


@router.post("/store/namespaces", response_model=Namespaces, responses=responses(403, 413, 422))
async def list_namespaces(body: StoreListNamespaces, svc: ServiceDep) -> Any:
    """The namespaces that hold items, by prefix, suffix, depth (``store.list_namespaces``)."""
    return {"namespaces": await memory(svc).list_namespaces(body)}
