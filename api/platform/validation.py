"""Checks at the door: what a client sends is refused (422, saying what to do) before anything
stores it, if it could not be stored or could break a later read.

Metadata has its limits (:func:`check_metadata`), ids theirs, and a state update is refused if
the graph's state could not take it (:func:`check_state_writes`). The HTTP edge bounds the
request itself (``api.http.checked_route``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson

from api.platform.errors import Invalid

METADATA_MAX_DEPTH = 16
"""Levels of nesting in thread and run metadata (the metadata object itself is one level)."""
METADATA_MAX_BYTES = 65_536
"""Thread or run metadata as compact UTF-8 JSON; for a thread, after a PATCH merged into it."""
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
