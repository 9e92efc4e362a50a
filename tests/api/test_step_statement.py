"""A served run's step is stored by one statement (``api.store.checkpoint_tables.step``): the same
rows as the stock saver's statements, one by one, would store."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from api.durable.run_memory import run_configurable
from api.store.checkpoint_tables.rows import jsonb
from api.store.checkpoint_tables.step import TaskWrite, resolve_writes
from tests.utils.served import barrier, channels_graph, served_config


def _counter(version: Any) -> str:
    """A channel version without its random part
    (``api.durable.saver_pool.next_channel_version``)."""
    return str(version).split(".", 1)[0]


async def _rows(runtime: Any, thread_id: str) -> dict[str, list[Any]]:
    """The thread's checkpoints (oldest first, ids and times left out), blobs and writes."""
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT checkpoint, metadata, parent_checkpoint_id IS NULL AS first"
            " FROM checkpoints WHERE thread_id = %s ORDER BY checkpoint_id",
            (thread_id,),
        )
        checkpoints = []
        for row in await cur.fetchall():
            c = row["checkpoint"]
            checkpoints.append(
                (
                    row["first"],
                    c["v"],
                    c["channel_values"],
                    {k: _counter(v) for k, v in c["channel_versions"].items()},
                    {
                        node: {k: _counter(v) for k, v in seen.items()}
                        for node, seen in c["versions_seen"].items()
                    },
                    sorted(c.get("updated_channels") or []),
                    row["metadata"],
                )
            )
        cur = await conn.execute(
            "SELECT channel, type, blob FROM checkpoint_blobs WHERE thread_id = %s", (thread_id,)
        )
        blobs = sorted(
            (r["channel"], r["type"], bytes(r["blob"] or b"")) for r in await cur.fetchall()
        )
        cur = await conn.execute(
            "SELECT task_path, idx, channel, type, blob FROM checkpoint_writes"
            " WHERE thread_id = %s",
            (thread_id,),
        )
        writes = sorted(
            (r["task_path"], r["idx"], r["channel"], r["type"], bytes(r["blob"]))
            for r in await cur.fetchall()
        )
    return {"checkpoints": checkpoints, "blobs": blobs, "writes": writes}


async def test_a_served_run_stores_the_rows_the_stock_statements_store(runtime: Any) -> None:
    saver = runtime.saver
    graph = channels_graph(saver)
    served, stock = str(uuid.uuid4()), str(uuid.uuid4())
    for thread_id, is_served in ((served, True), (stock, False)):
        final = await graph.ainvoke(
            {}, served_config(thread_id, served=is_served), durability="sync"
        )
        assert final["label"] == "ended" and len(final["notes"]) == 4
    mine, theirs = await _rows(runtime, served), await _rows(runtime, stock)
    assert len(mine["checkpoints"]) == len(theirs["checkpoints"]) >= 4
    assert mine == theirs
    # And LangGraph reads the same history back.
    history = [s async for s in graph.aget_state_history(served_config(served, served=False))]
    stock_history = [s async for s in graph.aget_state_history(served_config(stock, served=False))]
    assert [s.values for s in history] == [s.values for s in stock_history]
    assert [s.next for s in history] == [s.next for s in stock_history]


async def test_repeated_writes_in_one_statement_store_what_one_by_one_would(
    runtime: Any,
) -> None:
    """Writes of one task to the same key in one statement (an ``INSERT … ON CONFLICT DO
    UPDATE`` may not touch a row twice): a repeated plain write keeps the first, a special
    write (``__error__``: the stock saver's upsert) the last."""
    saver = runtime.saver
    outcomes = []
    for served in (True, False):
        first = await saver.aput(
            {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}},
            empty_checkpoint(),
            {"step": -1},
            {},
        )
        config: Any = {"configurable": {**first["configurable"]}}
        if served:
            config["configurable"].update(run_configurable(barrier))
        writes: list[list[tuple[str, Any]]] = [
            [("notes", ["first"])],
            [("notes", ["second"])],
            [("__error__", "one")],
            [("__error__", "two")],
        ]
        if served:  # all queued for the checkpoint's statement, in this order
            calls = [asyncio.create_task(saver.aput_writes(config, w, "task-1")) for w in writes]
            await asyncio.sleep(0)
        else:  # the stock saver, one by one
            for w in writes:
                await saver.aput_writes(config, w, "task-1")
        await saver.aput(config, empty_checkpoint(), {"step": 0}, {})
        if served:
            await asyncio.gather(*calls)
        outcomes.append((await _rows(runtime, first["configurable"]["thread_id"]))["writes"])
    mine, theirs = outcomes
    assert mine == theirs
    assert len(mine) == 2
    [(_, _, _, _, error), (_, _, _, _, note)] = sorted(mine, key=lambda w: w[1])
    assert b"two" in error and b"first" in note


def test_resolving_writes_keeps_the_first_insert_and_the_last_upsert() -> None:
    def write(task: str, idx: int, value: str, upsert: bool) -> TaskWrite:
        return TaskWrite(("t", "", "c", task, "", idx, "ch", "json", value.encode()), upsert)

    inserts, upserts = resolve_writes(
        [
            write("a", 0, "a-first", False),
            write("a", 0, "a-again", False),
            write("b", -1, "b-one", True),
            write("b", -1, "b-two", True),
            write("c", 0, "c-insert", False),
            write("c", 0, "c-upsert", True),
            write("c", 0, "c-ignored", False),
            write("a", 1, "a-second", False),
        ]
    )
    assert [(r[3], r[5], r[8]) for r in inserts] == [("a", 0, b"a-first"), ("a", 1, b"a-second")]
    assert [(r[3], r[5], r[8]) for r in upserts] == [("b", -1, b"b-two"), ("c", 0, b"c-upsert")]


def test_jsonb_values_orjson_refuses_are_written_as_the_stock_saver_writes_them() -> None:
    assert json.loads(jsonb({"a": [1, "x"]})) == {"a": [1, "x"]}
    # Keys that are not strings and integers beyond 64 bits: the standard library's JSON.
    assert jsonb({1: "one"}) == json.dumps({1: "one"}).encode()
    assert json.loads(jsonb({"n": 2**70})) == {"n": 2**70}
