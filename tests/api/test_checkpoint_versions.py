"""Short channel versions (``SaverPool.get_next_version``): ordered, unique per fork, and
compatible with threads the stock ``AsyncPostgresSaver`` wrote."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from agent import ApprovalPolicy, Limits, build_graph
from agent.tools import default_tools
from api.durable.saver_pool import VERSION_DIGITS, next_channel_version
from api.engine.runtime import Runtime
from tests.utils.scripted_model import ScriptedChatModel, call

STOCK = AsyncPostgresSaver.get_next_version


def stock_version(count: int) -> str:
    """What the stock saver writes for the ``count``-th version."""
    return str(STOCK(None, count - 1, None))  # type: ignore[arg-type]


def test_versions_count_up_in_string_order() -> None:
    versions = [next_channel_version(None)]
    for _ in range(1200):
        versions.append(next_channel_version(versions[-1]))
    assert versions[0].startswith("0" * (VERSION_DIGITS - 1) + "1.")
    assert [int(v.split(".")[0]) for v in versions] == list(range(1, 1202))
    assert versions == sorted(versions), "LangGraph compares versions as strings"
    assert len(versions[0]) == VERSION_DIGITS + 9


def test_forks_of_one_version_get_different_blob_keys() -> None:
    base = next_channel_version(None)
    assert len({next_channel_version(base) for _ in range(500)}) == 500


def test_a_stock_thread_moves_on_to_short_versions_without_going_backwards() -> None:
    for count in (1, 2, 9, 10, 99, 12_345, 10**9):
        old = stock_version(count)
        new = next_channel_version(old)
        assert int(new.split(".")[0]) == count + 1
        assert new > old
        # A channel the new code versions from scratch still compares above every old version.
        assert next_channel_version(None) > old


def graph_on(saver: Any, runtime: Runtime, replies: list[Any]) -> Any:
    return build_graph(
        model=ScriptedChatModel(replies=replies),
        tools=default_tools(),
        checkpointer=saver,
        data_dir=runtime.settings.data_dir,
        policy=ApprovalPolicy({"*": "auto"}),
        limits=Limits(max_verify_attempts=1),
    )


async def stored_versions(runtime: Runtime, thread_id: str) -> list[str]:
    async with runtime.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT v.value AS version FROM checkpoints c,"
            " jsonb_each_text(c.checkpoint -> 'channel_versions') v WHERE c.thread_id = %s",
            (thread_id,),
        )
        return [row["version"] for row in await cur.fetchall()]


async def test_a_thread_written_by_the_stock_saver_continues_on_ours(runtime: Runtime) -> None:
    thread_id = str(uuid.uuid4())
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 50}
    stock = AsyncPostgresSaver(runtime.pool)  # type: ignore[arg-type]
    first = graph_on(stock, runtime, [call("list_files", path="."), AIMessage("first done")])
    await first.ainvoke({"messages": [HumanMessage("one")]}, config, durability="sync")
    old = await stored_versions(runtime, thread_id)
    assert old and all(len(v.split(".")[0]) == 32 for v in old)

    ours = graph_on(
        runtime.saver,
        runtime,
        [call("list_files", path="./"), call("list_files", path="."), AIMessage("second done")],
    )
    await ours.ainvoke({"messages": [HumanMessage("two")]}, config, durability="sync")
    state = await ours.aget_state(config)
    texts = [m.content for m in state.values["messages"] if m.type in ("human", "ai")]
    assert texts[0] == "one" and "first done" in texts
    assert texts.index("two") > texts.index("first done")
    assert texts[-1] == "second done"
    assert state.values["status"] == "agent_done"
    # Every node ran as often as its script says: three tool results, none repeated.
    assert [m.type for m in state.values["messages"]].count("tool") == 3
    latest = (await runtime.saver.aget_tuple(config)).checkpoint  # type: ignore[union-attr]
    assert all(len(v.split(".")[0]) == VERSION_DIGITS for v in latest["channel_versions"].values())


async def test_runs_on_our_saver_store_only_short_versions(runtime: Runtime) -> None:
    thread_id = str(uuid.uuid4())
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 50}
    graph = graph_on(runtime.saver, runtime, [call("list_files", path="."), AIMessage("done")])
    await graph.ainvoke({"messages": [HumanMessage("go")]}, config, durability="sync")
    versions = await stored_versions(runtime, thread_id)
    assert versions and {len(v) for v in versions} == {VERSION_DIGITS + 9}
