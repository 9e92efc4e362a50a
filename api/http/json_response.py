"""A large JSON answer written in one pass: a thread's state or history page.

FastAPI writes a route's returned value by walking it with ``jsonable_encoder`` and then the
standard library's ``json``: two passes in Python over what may be a long conversation's whole
message list (its state), ten times over for a history page. :func:`json_answer` hands it to
orjson once, which writes each message as the JSON pydantic makes of it
(``api.platform.serde.json_default``): a state's values need no ``to_jsonable`` copy first. What
orjson cannot write (an integer past 64 bits, a key of an odd type) goes through ``to_jsonable``
and ``json`` as before; a non-finite number is ``null`` (FastAPI's writer would fail on it).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

from api.platform.serde import graph_json, to_jsonable


class JsonAnswer(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        try:
            return graph_json(content)
        except TypeError:
            plain = to_jsonable(content)
            return json.dumps(plain, ensure_ascii=False, separators=(",", ":")).encode()


def json_answer(content: Any) -> JsonAnswer:
    """``content`` (JSON data, messages and what ``to_jsonable`` takes) as the 200 answer."""
    return JsonAnswer(content)
