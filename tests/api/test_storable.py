"""What goes into a ``jsonb`` column of the service's tables (``api.store.rows.storable``, and
the connections' JSON writer ``api.platform.jsonb``): a graph's values may hold what ``jsonb``
cannot (NUL characters, NaN, infinities), and must not keep a run from ending; and what is read
back of a thread's values for its checks."""

from __future__ import annotations

import json
import math

import psycopg
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Interrupt
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from api.platform import jsonb
from api.platform.database import migrate
from api.platform.serde import to_jsonable
from api.store import thread_values, threads
from api.store.rows import storable, storable_json


def test_nul_and_non_finite_numbers_are_made_storable(database_url: str) -> None:
    values = {"a\0b": ["x\0", math.nan, math.inf, -math.inf, 1.5, {"n": [math.nan]}]}
    cleaned = storable(values)
    assert cleaned == {"a\ufffdb": ["x\ufffd", None, None, None, 1.5, {"n": [None]}]}
    with psycopg.connect(database_url) as conn:
        [(stored,)] = conn.execute("SELECT %s::jsonb", (Jsonb(cleaned),)).fetchall()
        assert stored == cleaned
        try:
            conn.execute("SELECT %s::jsonb", (Jsonb(values),))
        except psycopg.DataError:
            pass  # what it guards against: jsonb refuses NUL and NaN
        else:
            raise AssertionError("jsonb took NUL and NaN: the guard would not be needed")


def test_the_connections_json_writer_makes_the_same_values_storable(database_url: str) -> None:
    """``api.platform.jsonb.dumps`` (the pool's JSON writer, and a thread's values'): the same
    storable JSON in one pass, a string that merely spells a NUL's escape left as it is, and
    what orjson cannot write exactly handed to ``json``."""
    values = {"a\0b": ["x\0", math.nan, math.inf, 1.5, {"n": [math.nan]}], "s": "\\u0000\\\0"}
    with psycopg.connect(database_url) as conn:
        [(stored,)] = conn.execute(
            "SELECT %s::jsonb", (Jsonb(values, dumps=jsonb.dumps),)
        ).fetchall()
    assert stored == {
        "a\ufffdb": ["x\ufffd", None, None, 1.5, {"n": [None]}],
        "s": "\\u0000\\\ufffd",
    }
    big = {"n": 2**70, 3: "int key"}
    assert jsonb.loads(jsonb.dumps(big)) == {"n": 2**70, "3": "int key"}  # exact, not a float
    assert jsonb.loads(b'{"n": 12345678901234567890123}') == {"n": 12345678901234567890123}


async def test_a_run_check_reads_a_threads_values_without_their_lists(database_url: str) -> None:
    """What a run's checks and an access check read of a thread: its values without their lists
    (a long conversation's messages), or none."""
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        await migrate(conn)
        await threads.create(conn, "t1", {}, None, None)
        values = {"messages": [{"type": "human", "content": "hi"}] * 3, "task": {"name": "greet"}}
        await threads.refresh_status(conn, "t1", after="idle", values=values, interrupts={})
        whole = await threads.get(conn, "t1")
        checks = await threads.get(conn, "t1", values="scalars")
        access = await threads.get(conn, "t1", values=False)
    assert whole is not None and whole["values"] == values
    assert checks is not None and checks["values"] == {"task": {"name": "greet"}}
    assert access is not None and access["values"] is None
    assert {k: v for k, v in access.items() if k != "values"} == {
        k: v for k, v in whole.items() if k != "values"
    }


def test_a_threads_values_are_stored_even_when_orjson_cannot_write_them(database_url: str) -> None:
    """A run's end writes its thread's values with ``storable_json``: what orjson refuses (an
    integer past 64 bits) goes through ``storable`` and ``json``, so a NaN beside it is still
    null, never the ``NaN`` token ``jsonb`` refuses (which would fail the run's end)."""
    values = {"big": 2**70, "x": math.nan, "s": "a\0b"}
    params = thread_values.state_columns(values, None)
    with psycopg.connect(database_url) as conn:
        [(stored,)] = conn.execute("SELECT %s::jsonb", (params["values"],)).fetchall()
    assert stored == {"big": 2**70, "x": None, "s": "a\ufffdb"}
    assert json.loads(storable_json({"n": math.inf})) == {"n": None}


def test_a_graphs_values_are_stored_as_their_json_copy_would_be(database_url: str) -> None:
    """A run's end hands its graph's values as they are (messages, interrupts, ...):
    ``storable_json`` writes each message as pydantic's JSON, in one pass, and what it stores is
    what the ``to_jsonable`` copy stored; NUL and NaN inside a message are made storable too,
    and a value orjson cannot write goes through the copy."""
    message = AIMessage(
        content="a\0b",
        id="m1",
        tool_calls=[{"name": "f", "args": {"x": math.nan, "y": [1, "z"]}, "id": "c"}],
    )
    values = {
        "messages": [HumanMessage(content="hi", id="h"), message],
        "pending": (Interrupt(value={"q": "go?"}, id="i"),),
        "tags": {"t"},
    }
    with psycopg.connect(database_url) as conn:
        stored = [
            conn.execute(
                "SELECT %s::jsonb", (thread_values.state_columns(v, None)["values"],)
            ).fetchone()
            for v in (values, to_jsonable(values), {**values, "big": 2**70})
        ]
    assert stored[0] == stored[1]
    assert stored[2] == ({**stored[1][0], "big": 2**70},)
    as_json = stored[0][0]
    assert as_json["messages"][1]["content"] == "a\ufffdb"
    assert as_json["messages"][1]["tool_calls"][0]["args"] == {"x": None, "y": [1, "z"]}
    assert as_json["pending"] == [{"id": "i", "value": {"q": "go?"}}]


def test_values_name_their_checkpoint_only_when_stored_as_a_state_answer_writes_them() -> None:
    """A thread's stored values answer for their checkpoint (``api.store.kept_state``) only
    when nothing was replaced to store them: a NUL (stored as U+FFFD, answered as it is) or an
    integer orjson cannot write (stored through ``json``) leaves the checkpoint unnamed."""
    plain = {"messages": [HumanMessage(content="hi", id="h")], "n": 1.5}
    assert thread_values.state_columns(plain, None, "cp-1")["values_at"] == "cp-1"
    assert thread_values.state_columns(plain, None)["values_at"] is None
    for odd in ({"s": "a\0b"}, {"big": 2**70}, {"messages": [HumanMessage("a\0", id="h")]}):
        assert thread_values.state_columns(odd, None, "cp-1")["values_at"] is None, odd
    # NaN is written as null by both writers: still exactly what the answer writes.
    assert thread_values.state_columns({"x": math.nan}, None, "cp-1")["values_at"] == "cp-1"
