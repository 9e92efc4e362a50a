"""LangGraph's checkpoint tables as threadline owns them (``api.store.checkpoint_tables``): it
starts only on tables at the migration version its statements are written for, and what it
assumes of LangGraph's types (a ``DeltaChannel``'s snapshot) still holds."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, NamedTuple, TypedDict

import psycopg
import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph

from api.durable.saver import PooledSaver
from api.engine.runtime import open_runtime
from api.platform.database import open_pool, prepare_schema
from api.platform.settings import Settings
from api.store.checkpoint_tables import KNOWN_VERSION, check_version
from api.store.checkpoint_tables.rows import is_delta_snapshot
from tests.utils.served import served_config


async def _version(database_url: str) -> Any:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT max(v) FROM checkpoint_migrations")
        row = await cur.fetchone()
        return row[0] if row else None


async def test_a_fresh_database_starts_and_its_tables_are_at_the_known_version(
    database_url: str,
) -> None:
    async with open_pool(database_url, max_size=4) as pool:
        saver = PooledSaver(pool, concurrency=2)
        await prepare_schema(pool, saver)
        assert await _version(database_url) == KNOWN_VERSION
        await prepare_schema(pool, saver)  # a restart: the same tables pass again
    assert len(AsyncPostgresSaver.MIGRATIONS) - 1 == KNOWN_VERSION


async def test_tables_a_newer_release_migrated_are_refused_with_what_to_do(
    database_url: str, settings: Settings
) -> None:
    async with open_pool(database_url, max_size=4) as pool:
        await prepare_schema(pool, PooledSaver(pool, concurrency=2))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO checkpoint_migrations (v) VALUES (%s)", (KNOWN_VERSION + 1,)
        )
    with pytest.raises(RuntimeError) as refused:
        async with open_runtime(settings):
            pass
    message = str(refused.value)
    assert "\n" not in message
    assert f"at migration version {KNOWN_VERSION + 1}" in message
    assert f"for version {KNOWN_VERSION}" in message
    assert "start the threadline release that did" in message
    assert await _version(database_url) == KNOWN_VERSION + 1  # nothing migrated


async def test_a_saver_release_with_other_migrations_is_refused(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        with pytest.raises(
            RuntimeError, match=rf"to version {KNOWN_VERSION + 1}, but .* {KNOWN_VERSION}: install"
        ):
            await check_version(conn, [*AsyncPostgresSaver.MIGRATIONS, "SELECT 1;"])


class Items(TypedDict, total=False):
    items: Annotated[
        list[int],
        DeltaChannel(
            lambda left, writes: [*left, *(x for w in writes for x in w)], snapshot_frequency=1
        ),
    ]


def _delta_graph(saver: PooledSaver) -> Any:
    def add(state: Items) -> Items:
        return {"items": [len(state.get("items") or [])]}

    g = StateGraph(Items)
    g.add_node("add", add)
    g.add_node("again", add)
    g.add_edge(START, "add")
    g.add_edge("add", "again")
    g.add_edge("again", END)
    return g.compile(checkpointer=saver)


async def _stored(runtime: Any, thread_id: str) -> list[Any]:
    """Each checkpoint's inline values (oldest first), and the thread's blobs."""
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT checkpoint -> 'channel_values' AS inline FROM checkpoints"
            " WHERE thread_id = %s ORDER BY checkpoint_id",
            (thread_id,),
        )
        inline = [r["inline"] for r in await cur.fetchall()]
        cur = await conn.execute(
            "SELECT channel, type, blob FROM checkpoint_blobs WHERE thread_id = %s", (thread_id,)
        )
        blobs = sorted(
            (r["channel"], r["type"], bytes(r["blob"] or b"")) for r in await cur.fetchall()
        )
    return [inline, blobs]


async def test_a_delta_channels_snapshot_is_stored_as_the_stock_saver_stores_it(
    runtime: Any,
) -> None:
    """LangGraph's snapshot of a ``DeltaChannel`` (here at every update) is recognized without
    its private type: a served run stores it with the stock saver's ``true`` marker inline, and
    both read back the same."""
    graph = _delta_graph(runtime.saver)
    served, stock = str(uuid.uuid4()), str(uuid.uuid4())
    for thread_id, is_served in ((served, True), (stock, False)):
        final = await graph.ainvoke({}, served_config(thread_id, served=is_served))
        assert final["items"] == [0, 1]
    mine, theirs = await _stored(runtime, served), await _stored(runtime, stock)
    assert mine == theirs
    assert any(values.get("items") is True for values in mine[0])  # a snapshot was taken
    again = await graph.aget_state(served_config(served, served=False))
    assert again.values["items"] == [0, 1]


class Pair(NamedTuple):
    value: Any
    other: Any = None


@pytest.mark.parametrize("value", [[1], (1, 2), {"value": 1}, Pair(1), "text", None])
def test_nothing_else_is_taken_for_a_snapshot(value: Sequence[Any]) -> None:
    assert not is_delta_snapshot(value)
