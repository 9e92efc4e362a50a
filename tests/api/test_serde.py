"""``api.platform.serde.to_jsonable``: JSON for what a graph streams and stores. Messages go
through pydantic's own JSON dump (one pass), and what it cannot put in JSON falls back to the
field-by-field walk instead of failing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Interrupt, Send
from pydantic import BaseModel

from api.platform.serde import to_jsonable


class Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


class Model(BaseModel):
    when: datetime
    tags: set[str]


def test_messages_are_the_sdk_shapes() -> None:
    call = {"name": "count", "args": {"page": 1}, "id": "c1"}
    values: dict[str, Any] = {
        "messages": [
            HumanMessage(content="hi", id="h"),
            AIMessage(content="", tool_calls=[call], id="a"),
            ToolMessage(content="3 notes", tool_call_id="c1", id="t"),
        ],
        "n": (1, 2),
    }
    out = to_jsonable(values)
    assert orjson.loads(orjson.dumps(out)) == out  # plain JSON all the way down
    human, ai, tool = out["messages"]
    assert (human["type"], human["content"], human["id"]) == ("human", "hi", "h")
    assert ai["tool_calls"] == [{**call, "type": "tool_call"}]
    assert (tool["type"], tool["tool_call_id"]) == ("tool", "c1")
    assert out["n"] == [1, 2]


def test_what_pydantic_cannot_dump_falls_back_to_the_walk() -> None:
    message = AIMessage(content="x", additional_kwargs={"odd": Opaque(), "raw": b"ab"})
    out = to_jsonable(message)
    assert out["additional_kwargs"] == {"odd": "<opaque>", "raw": "ab"}
    when = datetime(2026, 1, 2, tzinfo=UTC)
    assert to_jsonable(Model(when=when, tags={"a"})) == {
        "when": "2026-01-02T00:00:00Z",
        "tags": ["a"],
    }
    assert to_jsonable(Interrupt(value={"q": 1}, id="i1")) == {"id": "i1", "value": {"q": 1}}
    assert to_jsonable(Send("tools", {"k": Opaque()})) == {
        "node": "tools",
        "arg": {"k": "<opaque>"},
    }
