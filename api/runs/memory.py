"""Long-term memory: LangGraph's ``AsyncPostgresStore`` on the service's pool, given to every
served graph (``get_store()`` / a node's ``store`` argument) and behind the ``/store`` routes.

Tenants. Without authentication every caller shares one namespace space. With it, each
identity's items live under one root label only it reaches: the server puts
:func:`tenant_label` of the caller's identity in front of every namespace it is sent and takes
it off every namespace it returns, so alice's ``["notes"]`` is ``(alice, "notes")`` in the store
and bob can neither read, search nor list it. A graph serving alice reaches the same items at
``(tenant_label(identity), ...)``; ``tenant_label`` is the identity itself unless it contains
``.``, ``*``, ``%`` or NUL, or is empty or ``langgraph``.

A ``langgraph.json`` auth with ``@auth.on.store`` handlers (``(store, action)`` or
``(store, *)``) decides instead, as on LangGraph Server: the handler may refuse or rewrite
``value["namespace"]`` (LangGraph's example prepends ``ctx.user.identity``), and namespaces go
out as they are stored. Other handlers (``@auth.on``, ``@auth.on.threads``) do not apply here.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.store.base import Item, SearchItem
from langgraph.store.postgres.aio import AsyncPostgresStore

from api.auth import custom
from api.auth.access import Access
from api.auth.user import NOBODY, User
from api.contract.memory import (
    MAX_LABELS,
    RESERVED_ROOT,
    StoreDelete,
    StoreListNamespaces,
    StorePut,
    StoreSearch,
    check_label,
)
from api.platform.errors import Forbidden

logger = logging.getLogger(__name__)

Namespace = tuple[str, ...]


def tenant_label(identity: str) -> str:
    """One namespace label per identity, distinct for distinct identities: ``%`` ``.`` ``*``
    and NUL percent-encoded; the empty identity and ``langgraph`` get forms escaping never
    produces."""
    if not identity:
        return "%"
    if identity == RESERVED_ROOT:
        return "%6C" + RESERVED_ROOT[1:]
    return (
        identity.replace("%", "%25").replace(".", "%2E").replace("*", "%2A").replace("\x00", "%00")
    )


def _store_handler(access: Access, action: str) -> bool:
    if access.auth is None:
        return False
    handlers = custom.registered(access.auth).on
    return any(("store", a) in handlers for a in (action, "*"))


class Memory:
    """The ``/store`` operations for one caller, within that caller's namespaces."""

    def __init__(self, store: AsyncPostgresStore, access: Access, user: User) -> None:
        self.store = store
        self.access = access
        self.user = user

    async def _scope(self, action: str, value: dict[str, Any]) -> tuple[Namespace, Namespace]:
        """(the namespace to use, the prefix to strip from what goes out)."""
        namespace: Namespace = tuple(value.get("namespace") or ())
        if not self.access.enabled or self.user is NOBODY:
            return namespace, ()
        if self.access.auth is not None and _store_handler(self.access, action):
            await custom.authorize(self.access.auth, self.user, "store", action, value)
            return _handler_namespace(value.get("namespace")), ()
        prefix = (tenant_label(self.user.identity),)
        return (*prefix, *namespace), prefix

    async def put(self, body: StorePut) -> None:
        value: dict[str, Any] = {
            "namespace": tuple(body.namespace),
            "key": body.key,
            "value": body.value,
            "index": body.index,
        }
        namespace, _ = await self._scope("put", value)
        _check_item_namespace(namespace)
        item = value["value"] if isinstance(value.get("value"), dict) else body.value
        await self.store.aput(namespace, body.key, item, index=body.index, ttl=body.ttl)

    async def get(
        self, namespace: list[str], key: str, refresh_ttl: bool | None
    ) -> dict[str, Any] | None:
        ns, strip = await self._scope("get", {"namespace": tuple(namespace), "key": key})
        _check_item_namespace(ns)
        found = await self.store.aget(ns, key, refresh_ttl=refresh_ttl)
        return _out(found, strip) if found is not None else None

    async def delete(self, body: StoreDelete) -> None:
        value = {"namespace": tuple(body.namespace), "key": body.key}
        ns, _ = await self._scope("delete", value)
        _check_item_namespace(ns)
        await self.store.adelete(ns, body.key)

    async def search(self, body: StoreSearch) -> list[dict[str, Any]]:
        value = {
            "namespace": tuple(body.namespace_prefix),
            "filter": body.filter,
            "limit": body.limit,
            "offset": body.offset,
            "query": body.query,
        }
        ns, strip = await self._scope("search", value)
        found = await self.store.asearch(
            ns,
            query=body.query,
            filter=body.filter,
            limit=body.limit,
            offset=body.offset,
            refresh_ttl=body.refresh_ttl,
        )
        return [_out(item, strip) for item in found if item.namespace[: len(strip)] == strip]

    async def list_namespaces(self, body: StoreListNamespaces) -> list[list[str]]:
        value = {
            "namespace": tuple(body.prefix) if body.prefix is not None else None,
            "suffix": tuple(body.suffix) if body.suffix is not None else None,
            "max_depth": body.max_depth,
            "limit": body.limit,
            "offset": body.offset,
        }
        prefix, strip = await self._scope("list_namespaces", value)
        max_depth = body.max_depth + len(strip) if body.max_depth is not None else None
        found = await self.store.alist_namespaces(
            prefix=prefix or None,
            suffix=tuple(body.suffix) if body.suffix else None,
            max_depth=max_depth,
            limit=body.limit,
            offset=body.offset,
        )
        return [list(ns[len(strip) :]) for ns in found if ns[: len(strip)] == strip]


def _handler_namespace(namespace: Any) -> Namespace:
    """The namespace a store handler left in ``value``, if it is one."""
    try:
        labels = tuple(namespace or ())
        if len(labels) > MAX_LABELS + 4 or not all(isinstance(label, str) for label in labels):
            raise ValueError("not a list of strings")
        for label in labels:
            check_label(label)
    except (TypeError, ValueError) as err:
        logger.error("the store auth handler left namespace %r: %s", namespace, err)
        raise Forbidden(
            "Not allowed: the server's store auth handler gave no valid namespace."
        ) from None
    return labels


def _check_item_namespace(namespace: Namespace) -> None:
    if not namespace or namespace[0] == RESERVED_ROOT:
        raise Forbidden("Not allowed: the server's store auth handler gave no valid namespace.")


def _out(item: Item | SearchItem, strip: Namespace) -> dict[str, Any]:
    out = item.dict()  # a SearchItem's has its score
    out["namespace"] = list(item.namespace[len(strip) :])
    return out
