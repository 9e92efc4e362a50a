"""A state or history answer written by orjson in one pass (``api.http.json_response``) is the
JSON ``to_jsonable`` made of it before: for messages, interrupts, Sends, pydantic models (one
pydantic cannot write in JSON too), dataclasses, sets, tuples, dates, UUIDs, enums, bytes and
paths; what orjson cannot write (an integer past 64 bits) still answers; NaN is ``null``."""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from datetime import UTC, date, datetime
from enum import Enum
from pathlib import PurePosixPath
from typing import Any

import orjson
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Interrupt, Send
from pydantic import BaseModel

from api.http.json_response import json_answer
from api.platform.serde import to_jsonable


class Colour(Enum):
    RED = "red"


@dataclasses.dataclass
class Note:
    text: str
    tags: tuple[str, ...]


class Odd(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    handle: Any


STATE: dict[str, Any] = {
    "messages": [
        HumanMessage(content="hi ünïcode \u0000 nul", id="h1"),
        AIMessage(
            content="",
            id="a1",
            tool_calls=[{"name": "count", "args": {"page": 1, "nested": [1.5, None]}, "id": "c1"}],
        ),
        ToolMessage(content=[{"type": "text", "text": "3 notes"}], tool_call_id="c1", id="t1"),
    ],
    "pending": [Interrupt(value={"question": "go?"}, id="i1"), Send("tools", {"x": 1})],
    "note": Note("n", ("a", "b")),
    "seen": {3},
    "when": datetime(2026, 12, 6, 7, 0, 1, 500, tzinfo=UTC),
    "day": date(2026, 12, 6),
    "id": uuid.UUID(int=7),
    "colour": Colour.RED,
    "raw": b"bytes",
    "path": PurePosixPath("/a/b"),
    "odd": Odd(handle=object()),
    "nested": {"k": [(1, 2), {"m": AIMessage(content="deep", id="d1")}]},
}


def answer(content: Any) -> Any:
    return json.loads(json_answer(content).body)


def test_equals_to_jsonable() -> None:
    expected = orjson.loads(orjson.dumps(to_jsonable(STATE)))
    got = answer(STATE)
    odd = got.pop("odd"), expected.pop("odd")
    assert got == expected
    assert odd[0]["handle"].startswith("<object object at")  # repr, as before


@pytest.mark.parametrize("value", [2**70, {"big": [2**65]}])
def test_what_orjson_cannot_write_still_answers(value: Any) -> None:
    assert answer({"v": value, "m": HumanMessage(content="x", id="h")})["v"] == value


def test_nan_is_null() -> None:
    assert answer({"x": math.nan, "y": [math.inf]}) == {"x": None, "y": [None]}
