"""Checks at the door: what a client sends is refused (422, saying what to do) before anything
stores it, if it could not be stored or could break a later read.

Every JSON request body goes through :func:`parse_body` (the routes use :class:`CheckedRoute`):
valid UTF-8 JSON, finite numbers, integers within 64 bits, no NUL character and no unpaired
surrogate in any string or key (PostgreSQL text and ``jsonb`` cannot hold them), at most
``MAX_JSON_DEPTH`` levels of nesting. Metadata has its own, smaller, limits
(:func:`check_metadata`). Path and query parameters are bounded by the types below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import orjson
from fastapi import Path, Query, Request, Response
from fastapi.routing import APIRoute

from api.errors import Invalid

MAX_JSON_DEPTH = 64
"""Levels of nesting in a request body: ``{}`` is one level, ``{"a": []}`` two."""
METADATA_MAX_DEPTH = 16
"""Levels of nesting in thread and run metadata (the metadata object itself is one level)."""
METADATA_MAX_BYTES = 65_536
"""Thread or run metadata as compact UTF-8 JSON; for a thread, after a PATCH merged into it."""
MAX_INT = 2**63 - 1
"""Integers anywhere in a body fit PostgreSQL's ``bigint``: -2^63 .. 2^63 - 1."""
MIN_INT = -(2**63)
MAX_OFFSET = 2**53 - 1
"""Offsets and ``after_id``: the largest integer every JSON client (JavaScript's too) reads
exactly, and far past any table's end."""
MAX_ID_LENGTH = 200
"""Thread ids, run ids, assistant ids, interrupt ids and checkpoint ids."""
THREAD_ID_PATTERN = r"^[A-Za-z0-9_.:-]+$"
THREAD_ID_RULE = (
    f"letters, digits, '_', '.', ':' or '-', 1 to {MAX_ID_LENGTH} characters (a UUID is fine)"
)
MAX_WORKSPACE_PATH = 1024
"""Characters in a workspace path (each of its parts is also at most 255 bytes)."""

ThreadId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=THREAD_ID_PATTERN,
        description=f"The thread's id: {THREAD_ID_RULE}.",
    ),
]
RunId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="The run's id (a UUID).")
]
AssistantId = Annotated[
    str, Path(min_length=1, max_length=MAX_ID_LENGTH, description="The assistant (graph) id.")
]
Limit = Annotated[int, Query(ge=1, le=1000, description="At most this many items (1-1000).")]
Offset = Annotated[
    int, Query(ge=0, le=MAX_OFFSET, description="Skip this many items (0 to 2^53 - 1).")
]


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


def check_text(value: str, what: str) -> str:
    """A string that PostgreSQL can store: no NUL, no unpaired surrogate."""
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character (\\u0000); remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} contains an unpaired surrogate; send valid Unicode") from None
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Thread or run metadata within the documented limits (a pydantic after-validator)."""
    depth = _depth(value)
    if depth > METADATA_MAX_DEPTH:
        raise ValueError(
            f"metadata is nested {depth} levels deep; at most {METADATA_MAX_DEPTH} are allowed "
            "(the metadata object itself is one): flatten it"
        )
    size = metadata_size(value)
    if size > METADATA_MAX_BYTES:
        raise ValueError(
            f"metadata is {size} bytes as JSON; at most {METADATA_MAX_BYTES} are allowed: "
            "keep large data in the thread's state or workspace"
        )
    return value


def metadata_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (what ``METADATA_MAX_BYTES`` counts)."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # not JSON (cannot come from a request body): count it as too large
        return METADATA_MAX_BYTES + 1


class CheckedRoute(APIRoute):
    """A route whose JSON body is parsed by :func:`parse_body` before FastAPI reads it.

    FastAPI then validates the already-parsed value (``Request.json()`` returns it), so a body
    is parsed once. The content type decides, as before, whether the body is taken as JSON.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            body = await request.body()
            if body:
                request._json = parse_body(body)
            return await handler(request)

        return checked


def _writes(values: Any) -> list[tuple[str, Any]]:
    """A graph input or ``command.update`` as (state key, value) pairs."""
    if isinstance(values, dict):
        return [(k, v) for k, v in values.items() if isinstance(k, str)]
    if isinstance(values, list):
        return [
            (p[0], p[1])
            for p in values
            if isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str)
        ]
    return []


def _apply(channel: Any, base: Any, value: Any) -> None:
    fresh = channel.copy() if base is _EMPTY else channel.from_checkpoint(base)
    fresh.update([value])


_EMPTY = object()


async def check_state_writes(
    graph: Any, values: Any, where: str, current: Callable[[], Coroutine[Any, Any, Any]]
) -> None:
    """Refuse (422) a value the graph's state cannot take, before it is stored.

    An input or ``command.update`` is saved as a pending write before any node runs; a value
    its channel's reducer rejects (a message ``add_messages`` cannot read, say) would make every
    later read of the thread's state fail. Each value is applied to an empty copy of its
    channel; one that fails is tried again on the thread's current value (``current()``: a
    removal of an existing message fails only on an empty list) before it is refused.
    """
    channels = getattr(getattr(graph, "builder", None), "channels", None)
    if not isinstance(channels, dict):
        return  # not a StateGraph: nothing known about its channels
    failed = []
    for key, value in _writes(values):
        channel = channels.get(key)
        if channel is None:
            continue
        try:
            _apply(channel, _EMPTY, value)
        except Exception as err:
            failed.append((key, channel, value, err))
    if not failed:
        return
    state: Any = None
    for key, channel, value, first in failed:
        if state is None:
            state = await current()
        problem: Exception = first
        if isinstance(state, dict) and key in state:
            try:
                _apply(channel, state[key], value)
                continue
            except Exception as again:
                problem = again
        reason = str(problem).split("\n")[0][:300] or type(problem).__name__
        raise Invalid(
            f"Invalid request: {where}.{key}: the graph's state cannot take this value "
            f"({reason}). Send {key} in the shape the graph reads"
            + (' (messages: [{"role": "user", "content": "..."}])' if key == "messages" else "")
            + "."
        )
