"""Tool concurrency in one step (``agent.concurrency``): read-only calls run together up to
``Limits.tool_concurrency`` per thread; calls that write run one at a time, in the order the
model gave them, also through approvals and after a crash.

The real graph on the real PostgreSQL checkpointer, its model scripted to make a step's calls in
one message. The tools below record when they run (``time.monotonic`` and how many are in flight),
so overlap and order are read from what the tools saw, not from wall-clock thresholds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphInterrupt
from langgraph.types import Command
from pydantic import BaseModel, ValidationError

import agent.concurrency
from agent import ApprovalPolicy, Limits
from agent.concurrency import ToolTurns
from agent.settings import AgentSettings
from agent.state import ToolTask
from agent.tools import ToolContext, ToolSpec, default_tools
from api.engine.runtime import Runtime
from api.platform.settings import Settings
from tests.agent.test_graph import AUTO, ask, make_config, stream, tool_messages, workspace
from tests.utils.graphs import scripted_graph
from tests.utils.scripted_model import ScriptedChatModel, call, calls

TIMEOUT = 60
"""Seconds any one run may take here: a deadlock fails the test instead of hanging it."""


class Work(BaseModel):
    label: str
    seconds: float = 0.0


@dataclass
class Run:
    label: str
    tool: str
    start: float
    end: float | None = None


@dataclass
class Recorder:
    """Tools that record their runs: start and end times, and the most in flight at once."""

    runs: list[Run] = field(default_factory=list)
    active: int = 0
    peak: int = 0
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    """A call whose label is here waits for its event before it ends (set by the test)."""

    def tool(self, name: str, *, read_only: bool) -> ToolSpec:
        async def run(ctx: ToolContext, args: BaseModel) -> str:
            work = cast(Work, args)
            entry = Run(work.label, name, time.monotonic())
            self.runs.append(entry)
            self.active += 1
            self.peak = max(self.peak, self.active)
            try:
                await asyncio.sleep(work.seconds)
                if work.label in self.gates:
                    await self.gates[work.label].wait()
            finally:
                self.active -= 1
            entry.end = time.monotonic()
            return f"{work.label} done"

        kind = "Reads" if read_only else "Writes"
        return ToolSpec(name, f"{kind} slowly.", Work, read_only, run)

    def of(self, label: str) -> list[Run]:
        return [r for r in self.runs if r.label == label]

    def order(self, tool: str) -> list[str]:
        return [r.label for r in sorted(self.runs, key=lambda r: r.start) if r.tool == tool]


def most_at_once(runs: list[Run]) -> int:
    """The largest number of the runs' [start, end] intervals that overlap at one instant."""
    edges = sorted([(r.start, 1) for r in runs] + [(cast(float, r.end), -1) for r in runs])
    now = peak = 0
    for _t, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def assert_one_at_a_time(runs: list[Run]) -> None:
    for before, after in itertools.pairwise(runs):
        assert before.end is not None and before.end <= after.start, (before, after)


async def run_to_end(graph: Any, graph_input: Any, config: Any) -> None:
    await asyncio.wait_for(stream(graph, graph_input, config), TIMEOUT)


# --------------------------------------------------------------------------------------------
# edits of one file


async def test_two_edits_of_one_file_in_one_step_both_apply(
    runtime: Runtime, settings: Settings
) -> None:
    """Two ``edit_file`` calls on one file in one step (and a third that edits what the first
    wrote): each reads the file the previous one left, so no update is lost."""
    filler = "x" * 4_000_000  # a large file: run together, the edits' reads and writes overlap
    text = f"alpha\n{filler}\nomega\n"
    edits = [
        call("edit_file", path="big.txt", old="alpha", new="ALPHA"),
        call("edit_file", path="big.txt", old="omega", new="OMEGA"),
        call("edit_file", path="big.txt", old="ALPHA", new="ALPHA!"),
    ]
    model = ScriptedChatModel(replies=[calls(*edits), AIMessage("Edited.")])
    graph = scripted_graph(runtime, model, policy=ApprovalPolicy(AUTO))
    config = make_config(Limits())
    big = workspace(settings, config) / "big.txt"
    big.parent.mkdir(parents=True)
    big.write_text(text)
    await run_to_end(graph, ask("Edit big.txt three times."), config)

    state = await graph.aget_state(config)
    results = {m.tool_call_id: m for m in tool_messages(state.values["messages"])}
    assert [results[str(e["id"])].status for e in edits] == ["success"] * 3
    assert big.read_text() == f"ALPHA!\n{filler}\nOMEGA\n"


# --------------------------------------------------------------------------------------------
# reads together, up to the cap


async def test_reads_run_together_but_never_more_than_the_cap(runtime: Runtime) -> None:
    recorder = Recorder()
    reads = [call("slow_read", label=f"r{i}", seconds=0.3) for i in range(7)]
    model = ScriptedChatModel(replies=[calls(*reads), AIMessage("Read.")])
    limits = Limits(tool_concurrency=3)
    graph = scripted_graph(
        runtime, model, limits=limits, tools=[recorder.tool("slow_read", read_only=True)]
    )
    config = make_config(limits)
    await run_to_end(graph, ask("Read seven things."), config)

    assert len(recorder.runs) == 7 and all(r.end is not None for r in recorder.runs)
    assert recorder.peak == 3  # overlapping, as many as the cap allows, and no more
    assert most_at_once(recorder.runs) == 3
    state = await graph.aget_state(config)
    assert [m.status for m in tool_messages(state.values["messages"])] == ["success"] * 7


def test_the_cap_is_4_by_default_and_a_setting(
    monkeypatch: pytest.MonkeyPatch, clean_env: None
) -> None:
    assert Limits().tool_concurrency == 4
    assert AgentSettings().limits.tool_concurrency == 4
    monkeypatch.setenv("THREADLINE_TOOL_CONCURRENCY", "2")
    assert AgentSettings().limits.tool_concurrency == 2
    monkeypatch.setenv("THREADLINE_TOOL_CONCURRENCY", "0")
    with pytest.raises(ValidationError, match="tool_concurrency"):
        AgentSettings()


# --------------------------------------------------------------------------------------------
# writes one at a time, in the model's order


async def test_writes_run_one_at_a_time_in_the_models_order(runtime: Runtime) -> None:
    """The first write is the slowest: run together, the later ones would start and end first.
    Reads of the same step do not wait for the writes."""
    recorder = Recorder()
    writes = [call("slow_write", label=f"w{i}", seconds=0.3 - 0.1 * i) for i in range(4)]
    reads = [call("slow_read", label=f"r{i}", seconds=0.05) for i in range(2)]
    step = [writes[0], reads[0], writes[1], writes[2], reads[1], writes[3]]
    model = ScriptedChatModel(replies=[calls(*step), AIMessage("Wrote.")])
    tools = [
        recorder.tool("slow_write", read_only=False),
        recorder.tool("slow_read", read_only=True),
    ]
    graph = scripted_graph(runtime, model, tools=tools, policy=ApprovalPolicy(AUTO))
    config = make_config(Limits())
    await run_to_end(graph, ask("Write four things."), config)

    assert recorder.order("slow_write") == ["w0", "w1", "w2", "w3"]
    written = [recorder.of(f"w{i}")[0] for i in range(4)]
    assert_one_at_a_time(written)
    first_end = cast(float, written[0].end)
    assert all(recorder.of(f"r{i}")[0].start < first_end for i in range(2))
    state = await graph.aget_state(config)
    assert [m.status for m in tool_messages(state.values["messages"])] == ["success"] * 6


async def test_denied_and_rejected_calls_do_not_hold_up_later_writes(runtime: Runtime) -> None:
    """Through the review: an approved write, a rejected one and a denied one between writes.
    Those that run keep the model's order; those that run nothing are done at once."""
    recorder = Recorder()
    step = [
        call("slow_write", label="w0", seconds=0.2),
        call("asked_write", label="w1", seconds=0.1),  # approved
        call("asked_write", label="w2"),  # rejected
        call("denied_write", label="w3"),  # denied by the policy
        call("teleport", to="mars"),  # an unknown tool: a write that runs nothing
        call("slow_write", label="w5"),
    ]
    model = ScriptedChatModel(replies=[calls(*step), AIMessage("Done.")])
    tools = [
        recorder.tool("slow_write", read_only=False),
        recorder.tool("asked_write", read_only=False),
        recorder.tool("denied_write", read_only=False),
    ]
    policy = ApprovalPolicy({"asked_write": "ask", "denied_write": "deny", "*": "auto"})
    graph = scripted_graph(runtime, model, tools=tools, policy=policy)
    config = make_config(Limits())
    await run_to_end(graph, ask("Write what you may."), config)
    state = await graph.aget_state(config)
    (pending,) = state.interrupts
    assert [a["args"]["label"] for a in pending.value["action_requests"]] == ["w1", "w2"]
    assert recorder.runs == []  # nothing of the step ran before the answer

    answer = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "not w2"}]}
    await run_to_end(graph, Command(resume={pending.id: answer}), config)
    assert [r.label for r in sorted(recorder.runs, key=lambda r: r.start)] == ["w0", "w1", "w5"]
    assert_one_at_a_time([recorder.of(label)[0] for label in ("w0", "w1", "w5")])
    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    results = {m.tool_call_id: m for m in tool_messages(state.values["messages"])}
    statuses = [results[str(c["id"])].status for c in step]
    assert statuses == ["success", "success", "error", "error", "error", "success"]


# --------------------------------------------------------------------------------------------
# a crash in the middle of a step's writes


@pytest.mark.parametrize("fresh", [True, False], ids=["another-process", "same-process"])
async def test_after_a_crash_mid_step_the_rest_of_the_writes_run_once_in_order(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, fresh: bool
) -> None:
    """w0 finishes and is saved; w1 is running and w2 waiting for it when the run is cancelled.
    The resume runs w1 and w2 (in order), never w0 again, and nothing waits for w0, which is not
    running any more: on a new graph (another process) this process never saw w0, so only the
    checkpoint says it is done. The checkpoint's safety re-read is pushed past the test's
    timeout, so the test fails if the first look at the checkpoint did not find w0."""
    monkeypatch.setattr(agent.concurrency, "RECHECK_SECONDS", 10 * TIMEOUT)
    recorder = Recorder()
    recorder.gates["w1"] = asyncio.Event()
    writes = [call("slow_write", label=f"w{i}") for i in range(3)]
    script: list[Any] = [calls(*writes), AIMessage("Wrote.")]
    tools = [recorder.tool("slow_write", read_only=False)]
    policy = ApprovalPolicy(AUTO)
    graph = scripted_graph(runtime, ScriptedChatModel(replies=script), tools=tools, policy=policy)
    config = make_config(Limits())

    w0_saved = asyncio.Event()

    async def first_attempt() -> None:
        async for chunk in graph.astream(
            ask("Write three things."), config, stream_mode="updates", durability="sync"
        ):
            update = cast(dict[str, Any], chunk).get("tools")
            if update and any(m.tool_call_id == writes[0]["id"] for m in update["messages"]):
                w0_saved.set()

    attempt = asyncio.create_task(first_attempt())
    await asyncio.wait_for(w0_saved.wait(), TIMEOUT)
    for _ in range(TIMEOUT * 50):  # until w1 runs (it then waits for its gate)
        if recorder.of("w1"):
            break
        await asyncio.sleep(0.02)
    assert recorder.of("w1") and not recorder.of("w2")
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    state = await graph.aget_state(config)
    assert state.next == ("tools", "tools")  # w1 and w2 are left; w0 is saved

    recorder.gates.pop("w1").set()
    if fresh:  # a new node, a new registry: what a restarted or another process has
        script = [AIMessage("Wrote.")]
        graph = scripted_graph(
            runtime, ScriptedChatModel(replies=script), tools=tools, policy=policy
        )
    await run_to_end(graph, None, config)

    assert len(recorder.of("w0")) == 1  # finished before the crash: not run again
    assert len(recorder.of("w1")) == 2  # cut off: run again, once
    assert len(recorder.of("w2")) == 1
    assert_one_at_a_time([recorder.of("w1")[1], recorder.of("w2")[0]])
    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    results = tool_messages(state.values["messages"])
    assert sorted(m.tool_call_id for m in results) == sorted(str(w["id"]) for w in writes)
    assert all(m.status == "success" for m in results)


def test_a_write_names_the_earlier_writes_of_its_step() -> None:
    """The payloads the router makes: position for every call, ``after`` only on writes."""
    from agent.graph import rule_calls
    from agent.tasks import TaskCatalog

    tools = {t.name: t for t in default_tools()}
    step: list[ToolCall] = [
        call("read_file", path="a"),
        call("write_file", path="b", content=""),
        call("list_files", path="."),
        call("nope"),
        call("edit_file", path="b", old="x", new="y"),
    ]
    state: Any = {"messages": [calls(*step)]}
    tasks = rule_calls(state, {}, policy=ApprovalPolicy(), tools=tools, tasks=TaskCatalog())
    assert [t["position"] for t in tasks] == [0, 1, 2, 3, 4]
    ids = [str(c["id"]) for c in step]
    assert [t.get("after") for t in tasks] == [None, [], None, [ids[1]], [ids[1], ids[3]]]


# --------------------------------------------------------------------------------------------
# the rules on their own: old payloads, an interrupted write, a failed one run again


def write_task(call_id: str, after: list[str]) -> ToolTask:
    return {"tool_call": ToolCall(name="w", args={}, id=call_id), "after": after, "position": 0}


async def test_old_payloads_run_at_once_and_a_stopped_write_stops_the_next() -> None:
    turns = ToolTurns(2, recheck_seconds=10 * TIMEOUT)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}  # no checkpointer
    old: ToolTask = {"tool_call": ToolCall(name="w", args={}, id="old")}
    async with turns.call(old, config), turns.turn(old, config):
        pass  # a payload from before the fields: nothing to wait for

    first, second = write_task("a", []), write_task("b", ["a"])
    entered = asyncio.Event()

    async def interrupted() -> None:
        async with turns.call(first, config):
            entered.set()
            await asyncio.sleep(0.05)
            raise GraphInterrupt(())

    async def waiting() -> None:
        await entered.wait()
        async with turns.call(second, config), turns.turn(second, config):
            pytest.fail("ran before the write it follows")

    results = await asyncio.wait_for(
        asyncio.gather(interrupted(), waiting(), return_exceptions=True), TIMEOUT
    )
    assert [type(r) for r in results] == [GraphInterrupt, GraphInterrupt]

    # The resume: "a" fails once (a retry runs it again), "b" runs after its second try.
    order: list[str] = []

    async def a_with_retry() -> None:
        with contextlib.suppress(RuntimeError):
            async with turns.call(first, config):
                raise RuntimeError("first try")
        await asyncio.sleep(0.05)
        async with turns.call(first, config), turns.turn(first, config):
            order.append("a")

    async def b() -> None:
        async with turns.call(second, config), turns.turn(second, config):
            order.append("b")

    await asyncio.wait_for(asyncio.gather(b(), a_with_retry()), TIMEOUT)
    assert order == ["a", "b"]
    assert turns.snapshot()["reading"] == {}
