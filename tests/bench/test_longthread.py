"""The long-thread benchmark: its chat graph adds 12 messages a run to one ``add_messages``
list, and ``python -m bench --only longthread`` measures a few runs on the floor and through a
real server, as the benchmark itself runs it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from bench import chat, longthread, report


@pytest.mark.parametrize("delta", [False, True], ids=["add_messages", "DeltaChannel"])
async def test_each_run_adds_its_twelve_messages(delta: bool) -> None:
    graph = chat.builder(delta).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke(chat.run_input(0), config)
    steps = [s.metadata["step"] async for s in graph.aget_state_history(config)]
    assert steps == list(range(chat.SUPERSTEPS, -2, -1))  # the input (-1, 0), then 11 steps
    for turn in range(1, 3):
        await graph.ainvoke(chat.run_input(turn), config)
    messages = (await graph.aget_state(config)).values["messages"]
    assert len(messages) == 3 * chat.MESSAGES_PER_RUN == 36
    one = messages[: chat.MESSAGES_PER_RUN]
    assert isinstance(one[0], HumanMessage) and one[0].content.startswith("turn 0")
    assert [type(m) for m in one[1:-1]] == [AIMessage, ToolMessage] * chat.ROUNDS
    assert isinstance(one[-1], AIMessage) and one[-1].content.startswith("Done: 5")


@pytest.mark.parametrize("delta", [False, True], ids=["add_messages", "DeltaChannel"])
def test_the_floor_and_the_service_side_by_side(
    pg_admin_url: str, tmp_path: Path, clean_env: None, delta: bool
) -> None:
    runs = 2 * longthread.EARLY
    with asyncio.Runner() as runner:
        result = longthread.measure(runner, pg_admin_url, runs, tmp_path, delta)
    assert result["channel"] == ("DeltaChannel" if delta else "add_messages")
    for side in ("floor", "service"):
        assert result[side]["runs"] == runs
        assert result[side]["messages"] == runs * chat.MESSAGES_PER_RUN
        assert result[side]["run_first_ms"] > 0 and result[side]["history_last_ms"] > 0
    assert set(result["service_over_floor"]) == {
        "run_first",
        "run_last",
        "state_last",
        "history_last",
    }
    table = report.longthread_markdown(result, {})
    assert "| a run, at the end (ms) |" in table and "threadline ÷ floor" in table
