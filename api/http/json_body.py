"""The strict parse of a JSON request body, :func:`parse_body` (``CheckedRoute`` in
:mod:`api.http.checked_route` runs it on every route's body): valid UTF-8 JSON, finite numbers,
integers within 64 bits, no NUL character and no unpaired surrogate in any string or key, at most
``MAX_JSON_DEPTH`` levels of nesting; what breaks a rule is refused (422) naming where it is and
what to send instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from api.platform.errors import Invalid

MAX_JSON_DEPTH = 64
"""Levels of nesting in a request body: ``{}`` is one level, ``{"a": []}`` two."""
MAX_INT = 2**63 - 1
"""Integers anywhere in a body fit PostgreSQL's ``bigint``: -2^63 .. 2^63 - 1."""
MIN_INT = -(2**63)


class _OutOfRange(int):
    """An integer literal outside 64 bits, kept as its text (see ``_find_big_int``)."""

    literal: str


def _bounded_int(text: str) -> int:
    value = int(text) if len(text) < 4300 else None  # Python refuses longer ones itself
    if value is not None and MIN_INT <= value <= MAX_INT:
        return value
    marker = _OutOfRange(0)
    marker.literal = text
    return marker


def _render(path: tuple[Any, ...]) -> str:
    """``metadata.tags.0``: where in the body (long paths and keys shortened)."""
    parts = []
    for p in path:
        text = str(p) if str(p).isprintable() else repr(p)
        parts.append(text if len(text) <= 40 else text[:37] + "...")
    if len(parts) > 8:
        parts = [*parts[:3], f"...({len(parts) - 6} more)...", *parts[-3:]]
    return ".".join(parts) or "body"


def _position(err: orjson.JSONDecodeError) -> str:
    return f"line {err.lineno}, column {err.colno}"


def _explain_decode_error(body: bytes, err: orjson.JSONDecodeError) -> str:
    """What is wrong with a body orjson could not parse, and what to send instead."""
    message = str(err.msg)
    rest = body[err.pos : err.pos + 9].lstrip(b"-")
    if rest.startswith((b"NaN", b"Infinity")):
        return (
            "the body is not valid JSON: NaN and Infinity are not JSON numbers "
            f"({_position(err)}); send a finite number, or null"
        )
    if "infinity" in message:
        return (
            f"the body has a number too large to be finite ({_position(err)}); send numbers "
            "within ±1.7e308, or large values as strings"
        )
    if "surrogate" in message and "UTF-8" not in message:
        return (
            f"the body has a string with an unpaired surrogate escape such as \\ud800 "
            f"({_position(err)}), which is not Unicode text; pair each high surrogate with a "
            "low one, or remove it"
        )
    if body.startswith(b"\xef\xbb\xbf"):
        return "the body starts with a byte order mark; send the JSON without one"
    if "UTF-8" in message:
        return f"the body is not valid UTF-8 ({_position(err)}); send JSON encoded as UTF-8"
    if "depth" in message or "recursion" in message:
        return (
            f"the body is nested more than {MAX_JSON_DEPTH} levels deep; send a flatter structure"
        )
    return f"the body is not valid JSON ({message}, {_position(err)}); send a JSON object"


def _walk(value: Any, path: tuple[Any, ...], depth: int, nul: bool) -> None:
    """Depth (and, when ``nul``, NUL characters) of a parsed body; raises Invalid at the first
    problem, naming where it is."""
    if isinstance(value, str):
        if nul and "\x00" in value:
            raise _nul(path)
        return
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        if isinstance(value, _OutOfRange):
            raise Invalid(
                f"Invalid request: {_render(path)}: the integer {value.literal[:30]}"
                f"{'...' if len(value.literal) > 30 else ''} is outside the 64-bit range "
                "(-2^63 to 2^63 - 1); send it as a string."
            )
        return
    if depth > MAX_JSON_DEPTH:
        raise Invalid(
            f"Invalid request: {_render(path)}: nested more than {MAX_JSON_DEPTH} levels deep "
            "(counting from the body); send a flatter structure."
        )
    for key, item in items:
        if nul and isinstance(key, str) and "\x00" in key:
            raise _nul((*path, key))
        _walk(item, (*path, key), depth + 1, nul)


def _nul(path: tuple[Any, ...]) -> Invalid:
    return Invalid(
        f"Invalid request: {_render(path)}: text contains a NUL character (\\u0000), which "
        "cannot be stored; remove it (send binary data base64-encoded, or as a workspace file)."
    )


_LONG_DIGITS = re.compile(rb"\d{19,}")


def parse_body(body: bytes) -> Any:
    """Parse a JSON request body strictly, or raise Invalid (422) with what to change."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise Invalid(
            f"Invalid request: {_explain_decode_error(body, err)}. See /docs for the schema."
        ) from None
    # A NUL can only come in as the escape \u0000 (a raw control character is not JSON).
    _walk(value, (), 1, b"\\u0000" in body)
    if _LONG_DIGITS.search(body):
        # Maybe an integer beyond 64 bits, which orjson turns into a float: find it exactly.
        try:
            exact = json.loads(body, parse_int=_bounded_int)
        except ValueError:  # orjson read it; this is only a second look at its integers
            return value
        _walk(exact, (), 1, False)
    return value
