"""The seam between the run server and the graphs it serves (``api.project.adapters``): a graph
from a
``langgraph.json`` runs, interrupts and resumes with no built-in-agent code in its path."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from api.builtin_agent.adapter import BuiltinAgent
from api.contract.runs import CommandBody, RunCreate
from api.lifecycle import open_service
from api.project.adapters import DEFAULT
from api.store import events
from api.store.claimed_run import ClaimedRun


class State(TypedDict, total=False):
    topic: str
    verdict: str


def ask(state: State) -> State:
    answer = interrupt({"question": f"Publish {state['topic']}?"})
    return {"verdict": f"{answer}: {state['topic']}"}


def plain_graph() -> StateGraph[State]:
    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder


async def test_a_config_graph_never_calls_the_builtin_agent_adapter(
    runtime: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    called: list[str] = []
    for name in (
        "check_run",
        "check_answer",
        "run_configurable",
        "recursion_limit",
        "replayed_call",
    ):

        def refuse(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            called.append(_name)
            raise AssertionError(f"BuiltinAgent.{_name} ran for a config graph")

        monkeypatch.setattr(BuiltinAgent, name, refuse)
    runtime.graphs["plain"] = plain_graph().compile(checkpointer=runtime.saver)
    assert runtime.adapter("plain") is DEFAULT
    thread_id = str(uuid.uuid4())
    async with open_service(settings, runtime=runtime) as svc:
        first = await svc.create_run(
            thread_id,
            RunCreate(assistant_id="plain", input={"topic": "tides"}, if_not_exists="create"),
        )
        await svc.wait_for_end(first["run_id"])
        state = await svc.state(thread_id, "plain")
        assert [i.value for i in state.interrupts] == [{"question": "Publish tides?"}]
        second = await svc.create_run(
            thread_id, RunCreate(assistant_id="plain", command=CommandBody(resume="yes"))
        )
        await svc.wait_for_end(second["run_id"])
        values = await svc.final_values(thread_id, second)
        async with runtime.pool.connection() as conn:
            ends = [await events.has_end(conn, r["run_id"]) for r in (first, second)]
    assert called == []
    assert values == {"topic": "tides", "verdict": "yes: tides"}
    assert ends == [True, True]
    assert (await svc.refreshed_run(thread_id, second["run_id"]))["status"] == "success"


async def test_a_forked_run_starts_at_its_checkpoint_and_a_later_attempt_continues_its_own(
    runtime: Any, settings: Any
) -> None:
    """A run with ``checkpoint`` starts there; once it saved a checkpoint of its own, another
    attempt (a takeover) continues from that one instead of forking again."""
    from api.engine.execution import Executor

    runtime.graphs["plain"] = plain_graph().compile(checkpointer=runtime.saver)
    thread_id = str(uuid.uuid4())
    async with open_service(settings, runtime=runtime) as svc:
        first = await svc.create_run(
            thread_id,
            RunCreate(assistant_id="plain", input={"topic": "tides"}, if_not_exists="create"),
        )
        await svc.wait_for_end(first["run_id"])
        history = [
            s
            async for s in runtime.graphs["plain"].aget_state_history(
                {"configurable": {"thread_id": thread_id}}
            )
        ]
        start = history[-1].config["configurable"]["checkpoint_id"]  # the input checkpoint
        body = RunCreate(assistant_id="plain", input=None, checkpoint_id=start)
        fork = await svc.create_run(thread_id, body)
        assert fork["kwargs"]["checkpoint"] == {"checkpoint_ns": "", "checkpoint_id": start}
        executor = Executor(runtime, svc.hub)
        await svc.wait_for_end(fork["run_id"])
        async with runtime.pool.connection() as conn:  # its row, as a takeover would claim it
            cur = await conn.execute("SELECT * FROM runs WHERE run_id = %s", (fork["run_id"],))
            row = await cur.fetchone()
        assert row is not None
        claimed = ClaimedRun.from_row(row)
        assert await executor._start(claimed) == {}  # it saved checkpoints of its own
        other = replace(claimed, run_id=str(uuid.uuid4()))
        assert await executor._start(other) == {"checkpoint_ns": "", "checkpoint_id": start}
    latest = await runtime.graphs["plain"].aget_state({"configurable": {"thread_id": thread_id}})
    assert latest.metadata["run_id"] == fork["run_id"]
    assert (
        latest.parent_config["configurable"]["checkpoint_id"]
        != history[0].config["configurable"]["checkpoint_id"]
    )
