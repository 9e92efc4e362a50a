"""Bodies of the ``/store`` routes (LangGraph Server's long-term memory), in the SDK's shapes.

A namespace is a list of labels: each a non-empty string without ``.`` (the store joins labels
with dots) or NUL, at most ``MAX_LABEL`` characters, at most ``MAX_LABELS`` of them. A key is
a non-empty string of at most ``MAX_KEY`` characters; a value is a JSON object.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from api.contract.runs import Strict
from api.platform.validation import MAX_OFFSET

MAX_LABEL = 256
MAX_LABELS = 32
MAX_KEY = 512
MAX_NAMESPACE = 512
"""Characters of a namespace with its labels joined by '.' (a GET's query stays small)."""
MAX_FILTER_KEYS = 64
MAX_QUERY = 4096
MAX_TTL_MINUTES = 60 * 24 * 366 * 100
"""A century, in minutes: longer is "forever", so send no ``ttl``."""
FILTER_OPS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
RESERVED_ROOT = "langgraph"
NAMESPACE_RULE = (
    f"a list of at most {MAX_LABELS} labels, each a non-empty string of at most {MAX_LABEL} "
    "characters without '.' or NUL"
)


def check_label(label: str) -> str:
    if not label:
        raise ValueError(f"namespace labels cannot be empty; a namespace is {NAMESPACE_RULE}")
    if "." in label:
        raise ValueError(
            f"namespace label {label[:60]!r} contains '.', which separates labels; use "
            "another character, or split it into two labels"
        )
    if "\x00" in label:
        raise ValueError("namespace labels cannot contain NUL characters")
    if len(label) > MAX_LABEL:
        raise ValueError(f"a namespace label is at most {MAX_LABEL} characters")
    return label


def check_namespace(labels: list[str]) -> list[str]:
    for label in labels:
        check_label(label)
    if len(".".join(labels)) > MAX_NAMESPACE:
        raise ValueError(f"a namespace is {NAMESPACE_RULE}")
    return labels


def check_item_namespace(labels: list[str]) -> list[str]:
    """The namespace of one item: not empty, and not under LangGraph's reserved root."""
    if not labels:
        raise ValueError(f"an item's namespace cannot be empty; send {NAMESPACE_RULE}")
    if labels[0] == RESERVED_ROOT:
        raise ValueError(f"the root label {RESERVED_ROOT!r} is reserved by LangGraph; pick another")
    return labels


def check_key(key: str) -> str:
    if "\x00" in key:
        raise ValueError("an item key cannot contain NUL characters")
    return key


def check_filter(flt: dict[str, Any]) -> dict[str, Any]:
    if len(flt) > MAX_FILTER_KEYS:
        raise ValueError(f"a filter has at most {MAX_FILTER_KEYS} fields")
    for field, cond in flt.items():
        if not field or len(field) > MAX_LABEL:
            raise ValueError(f"filter field names are 1 to {MAX_LABEL} characters")
        if isinstance(cond, dict):
            bad = [op for op in cond if op not in FILTER_OPS]
            if bad or not cond:
                raise ValueError(
                    f"filter.{field[:60]}: an object here is a comparison whose keys are "
                    f"operators ({', '.join(sorted(FILTER_OPS))}); to match an object value "
                    'exactly, use {"$eq": {...}}'
                )
    return flt


Namespace = Annotated[list[str], Field(max_length=MAX_LABELS), AfterValidator(check_namespace)]
ItemNamespace = Annotated[Namespace, AfterValidator(check_item_namespace)]
Key = Annotated[str, Field(min_length=1, max_length=MAX_KEY), AfterValidator(check_key)]
IndexPaths = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_LABEL)]],
    Field(max_length=MAX_FILTER_KEYS),
]
Limit = Annotated[int, Field(ge=1, le=1000)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]


class StorePut(Strict):
    """``PUT /store/items`` (the SDK's ``store.put_item``)."""

    namespace: ItemNamespace
    key: Key
    value: dict[str, Any] = Field(description="The item's data: a JSON object.")
    index: Literal[False] | IndexPaths | None = None
    ttl: float | None = Field(
        None,
        ge=1 / 60,
        le=MAX_TTL_MINUTES,
        description="Minutes until the item expires (at least a second's worth).",
    )


class StoreDelete(Strict):
    """``DELETE /store/items`` (the SDK's ``store.delete_item``)."""

    namespace: ItemNamespace
    key: Key


class StoreSearch(Strict):
    """``POST /store/items/search`` (the SDK's ``store.search_items``)."""

    namespace_prefix: Namespace = Field(default_factory=list)
    filter: Annotated[dict[str, Any], AfterValidator(check_filter)] | None = None
    limit: Limit = 10
    offset: Offset = 0
    query: str | None = Field(None, max_length=MAX_QUERY)
    refresh_ttl: bool | None = None


class StoreListNamespaces(Strict):
    """``POST /store/namespaces`` (the SDK's ``store.list_namespaces``)."""

    prefix: Namespace | None = None
    suffix: Namespace | None = None
    max_depth: int | None = Field(None, ge=1, le=MAX_LABELS)
    limit: Limit = 100
    offset: Offset = 0


class StoreItem(BaseModel):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: str
    updated_at: str
    score: float | None = None


class SearchItems(BaseModel):
    items: list[StoreItem]


class Namespaces(BaseModel):
    namespaces: list[list[str]]
