"""The long-thread benchmark: its chat graph adds 12 messages a run to one list, the built-in
agent 11 (a ``counter`` task a run), and ``python -m bench --only longthread`` measures a few
runs of each on the floor and through a real server, as the benchmark itself runs it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from bench import chat, longthread, longthread_agent, report
from bench.cli import parser


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


async def test_each_agent_run_is_a_new_task_that_adds_its_eleven_messages(
    tmp_path: Path, clean_env: None
) -> None:
    graph, extra = longthread_agent.compile_floor(
        InMemorySaver(),
        "postgresql://unused@127.0.0.1/unused",
        tmp_path,
    )
    config = {"configurable": {"thread_id": "t"}, **extra}
    for turn in range(3):
        await graph.ainvoke(longthread_agent.run_input(turn), config)
        values = (await graph.aget_state(config)).values
        assert values["status"] == "verified" and values["verdict"]["passed"]
        assert len(values["messages"]) == 11 * (turn + 1)
    assert longthread_agent.MESSAGES_PER_RUN == 11
    one = values["messages"][-11:]
    assert isinstance(one[0], HumanMessage) and "counter.txt" in one[0].text
    assert sum(isinstance(m, ToolMessage) for m in one) == longthread_agent.N
    assert isinstance(one[-1], AIMessage) and not one[-1].tool_calls


def test_the_workloads_a_choice_runs() -> None:
    assert longthread.chosen() == ["chat", "agent"]
    assert longthread.chosen("both", delta=True) == ["chat", "chat_delta", "agent"]
    assert longthread.chosen("agent") == ["agent"]
    assert longthread.chosen("chat", delta=True) == ["chat", "chat_delta"]
    assert parser().parse_args([]).longthread_graph == "both"
    assert parser().parse_args(["--longthread-graph", "agent"]).longthread_graph == "agent"
    with pytest.raises(SystemExit):
        parser().parse_args(["--longthread-graph", "nowork"])


def _check_sides(result: dict, runs: int, per_run: int) -> None:
    for side in ("floor", "service"):
        assert result[side]["runs"] == runs
        assert result[side]["messages"] == runs * per_run
        assert result[side]["run_first_ms"] > 0 and result[side]["history_last_ms"] > 0
        assert result[side]["run_growth"] > 0
    assert set(result["service_over_floor"]) == {
        "run_first",
        "run_last",
        "state_last",
        "history_last",
    }


def test_the_chat_graph_and_the_agent_beside_their_floors(
    pg_admin_url: str, tmp_path: Path, clean_env: None
) -> None:
    runs = 2 * longthread.EARLY
    with asyncio.Runner() as runner:
        result = longthread.measure(runner, pg_admin_url, runs, tmp_path)
    assert result["runs"] == runs and list(result["workloads"]) == ["chat", "agent"]
    chat_result, agent_result = result["workloads"]["chat"], result["workloads"]["agent"]
    assert chat_result["graph"] == "chat" and chat_result["channel"] == "add_messages"
    _check_sides(chat_result, runs, chat.MESSAGES_PER_RUN)
    assert agent_result["graph"] == "agent" and agent_result["channel"] == "DeltaChannel"
    _check_sides(agent_result, runs, longthread_agent.MESSAGES_PER_RUN)
    for side in ("floor", "service"):
        # Every run was a task that passed its check; the thread is short of compacting.
        assert agent_result[side]["verified_runs"] == runs
        assert agent_result[side]["compactions"] == 0
    table = report.longthread_markdown(result, {})
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| workload | messages at the end | a run at the start (ms) |")
    assert rows[1].startswith("| chat graph, `add_messages` | 240 | ")
    assert rows[2].startswith("| built-in agent, `counter` task | 220 | ")
    assert f"{runs} / {runs} of {runs} runs passed their acceptance check" in table


def test_the_chat_graph_with_a_delta_channel(
    pg_admin_url: str, tmp_path: Path, clean_env: None
) -> None:
    runs = 2 * longthread.EARLY
    with asyncio.Runner() as runner:
        result = longthread.measure(runner, pg_admin_url, runs, tmp_path, ["chat_delta"])
    delta = result["workloads"]["chat_delta"]
    assert delta["graph"] == chat.DELTA_GRAPH_ID and delta["channel"] == "DeltaChannel"
    _check_sides(delta, runs, chat.MESSAGES_PER_RUN)
    assert "| chat graph, `DeltaChannel` | 240 | " in report.longthread_markdown(result, {})
