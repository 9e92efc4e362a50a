"""The filters authorization handlers return, applied to a thread's metadata.

A filter maps metadata keys to a value (equality), ``{"$eq": value}`` or ``{"$contains": item}``
(the key's list holds the item), as on LangGraph Server. All keys must match.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.types.json import Jsonb

Filter = Mapping[str, Any]


def _check(key: Any, cond: Any) -> tuple[str, Any]:
    if not isinstance(key, str):
        raise ValueError(f"filter keys must be strings, not {key!r}")
    if isinstance(cond, Mapping):
        ops = set(cond)
        if ops == {"$eq"}:
            return "eq", cond["$eq"]
        if ops == {"$contains"}:
            return "contains", cond["$contains"]
        raise ValueError(f"filter on {key!r}: use a value, {{'$eq': v}} or {{'$contains': v}}")
    return "eq", cond


def matches(flt: Filter | None, metadata: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` passes the filter."""
    for key, cond in (flt or {}).items():
        op, value = _check(key, cond)
        have = metadata.get(key)
        if op == "eq" and have != value:
            return False
        if op == "contains":
            if not isinstance(have, list):
                return False
            wanted = value if isinstance(value, list) else [value]
            if not all(v in have for v in wanted):
                return False
    return True


def to_sql(flt: Filter | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """A WHERE fragment (``TRUE`` when empty) and its parameters, over a jsonb column."""
    parts: list[str] = []
    params: list[Any] = []
    for key, cond in (flt or {}).items():
        op, value = _check(key, cond)
        if op == "eq":
            parts.append(f"{column} @> %s")
            params.append(Jsonb({key: value}))
        else:
            parts.append(f"{column} @> %s")
            params.append(Jsonb({key: value if isinstance(value, list) else [value]}))
    return (" AND ".join(parts) or "TRUE"), params
