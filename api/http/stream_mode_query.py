"""A join's ``stream_mode`` query parameter, in every form the SDKs send it."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import Query

from api.contract.runs import SUPPORTED_MODES
from api.platform.errors import Invalid

MAX_QUERY_MODES = 32
"""``stream_mode`` values in one join's query, counting each item of a JSON array (there are six
modes; the rest is repetition)."""
StreamModeQuery = Annotated[
    list[str] | None,
    Query(
        description=(
            "Narrows a joined stream's modes, in any form LangGraph Server reads: one mode, "
            "the parameter repeated (`stream_mode=updates&stream_mode=custom`), or a JSON "
            'array (`stream_mode=["updates","custom"]`, what @langchain/langgraph-sdk 2.0.0 '
            "sends). Empty or absent: the run's own modes."
        ),
        json_schema_extra={
            "anyOf": [
                {
                    "type": "array",
                    "maxItems": MAX_QUERY_MODES,
                    "items": {
                        "anyOf": [
                            {"type": "string", "enum": [*SUPPORTED_MODES, ""]},
                            {
                                "type": "string",
                                "pattern": r"^\[",
                                "description": "A JSON array of modes.",
                            },
                        ]
                    },
                },
                {"type": "null"},
            ]
        },
    ),
]
"""Narrows a joined stream's modes (the SDK sends an empty value for "all of them")."""


def query_modes(stream_mode: list[str] | None) -> list[str]:
    """The modes a join's query names, each once, in order: ``stream_mode`` repeated (the Python
    SDK, the JS SDK 1.x), once, or as a JSON array (the JS SDK 2.0.0); LangGraph Server reads a
    value that starts with ``[`` as JSON too. Empty values mean "the run's own modes". An
    unknown mode, an array that is not JSON or not of strings, or more than
    ``MAX_QUERY_MODES`` values are a 422 (LangGraph Server would stream nothing for them)."""
    values = stream_mode or []
    requested: list[str] = []
    for value in values[: MAX_QUERY_MODES + 1]:
        requested.extend(_query_modes(value))
    if len(values) > MAX_QUERY_MODES or len(requested) > MAX_QUERY_MODES:
        raise Invalid(
            f"stream_mode names more than {MAX_QUERY_MODES} modes; name each of "
            f"{', '.join(SUPPORTED_MODES)} at most once"
        )
    requested = [m for m in requested if m]
    unknown = [m for m in requested if m not in SUPPORTED_MODES]
    if unknown:
        names = ", ".join(_quoted(m) for m in dict.fromkeys(unknown))
        raise Invalid(f"stream_mode {names} is not supported; use {', '.join(SUPPORTED_MODES)}")
    return list(dict.fromkeys(requested))


def _query_modes(value: str) -> list[str]:
    """One ``stream_mode`` value: a mode, or a JSON array of modes."""
    if not value.startswith("["):
        return [value]
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as err:
        raise Invalid(
            f"stream_mode {_quoted(value)} is not a JSON array ({err}); send "
            'stream_mode=["updates","custom"], or repeat stream_mode once per mode'
        ) from None
    items: list[Any] = parsed if isinstance(parsed, list) else [parsed]  # "[..." is a list
    wrong = [item for item in items if not isinstance(item, str)]
    if wrong:
        raise Invalid(
            f"stream_mode {_quoted(value)} holds {_JSON_KINDS.get(type(wrong[0]), 'a value')}: "
            'a JSON array of stream_mode holds mode names, as strings (["updates","custom"])'
        )
    return [str(item) for item in items]


_JSON_KINDS: dict[type, str] = {
    bool: "true or false",
    int: "a number",
    float: "a number",
    type(None): "null",
    list: "an array",
    dict: "an object",
}


def _quoted(text: str, limit: int = 60) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
