"""``json``/``jsonb`` through orjson on the service's connections: psycopg parses and writes
them with the standard library's ``json`` otherwise, and a long thread's values (its whole
message list, kept in ``threads.state_values``) made that parse the largest cost of reading the
thread. Set with psycopg's public ``set_json_loads``/``set_json_dumps``, per connection
(:func:`configure`, the pool's).

What orjson would read or write differently goes to ``json`` as before: a text with a run of 19
digits or more (orjson reads an integer past 64 bits as a float; ``json`` keeps it exact, and
``jsonb`` holds any), a value orjson cannot write.

What it writes, ``jsonb`` can hold: a non-finite number is ``null`` (orjson's own rule) and a NUL
character, which ``jsonb`` refuses, is U+FFFD, as ``api.store.rows.storable`` makes them; so a
value written on these connections needs no walk of its own first (a thread's values are its
whole message list).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from psycopg import AsyncConnection
from psycopg.types.json import set_json_dumps, set_json_loads

_LONG_NUMBER = re.compile(r"\d{19}")
_LONG_NUMBER_BYTES = re.compile(rb"\d{19}")


def loads(data: str | bytes) -> Any:
    found = (
        _LONG_NUMBER_BYTES.search(data) if isinstance(data, bytes) else _LONG_NUMBER.search(data)
    )
    if found is not None:
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")
"""A NUL's escape in JSON text: backslash, ``u0000``, after an even number of backslashes (an
odd one escapes the backslash before it: a string holding those six characters)."""


def storable_text(text: bytes) -> bytes:
    """JSON ``text`` with each NUL escape as U+FFFD, which ``jsonb`` takes (orjson already writes
    NaN and infinities as null)."""
    return _NUL.sub(rb"\1\\ufffd", text) if b"\\u0000" in text else text


def storable_dumps(obj: Any) -> bytes:
    """JSON ``jsonb`` takes, in orjson's one pass (NaN and infinities as null, NUL as U+FFFD);
    ``TypeError`` for what orjson cannot write (an integer past 64 bits, an unknown type)."""
    return storable_text(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS))


def dumps(obj: Any) -> bytes:
    """The connections' writer: :func:`storable_dumps`, else ``json`` (which writes NaN as
    ``NaN``, which ``jsonb`` refuses: a caller that may hold both runs ``storable`` first)."""
    try:
        return storable_dumps(obj)
    except TypeError:
        return storable_text(json.dumps(obj).encode())


async def configure(conn: AsyncConnection[Any]) -> None:
    """Make a new connection read and write JSON with orjson."""
    set_json_loads(loads, conn)
    set_json_dumps(dumps, conn)
