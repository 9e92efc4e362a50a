"""The compiled agent graph on a real PostgreSQL checkpointer: routing, guards, approvals, tools.

Every run streams ``updates`` and ``custom`` with ``durability="sync"``, as the service does.
Behaviours the offline model does not script (stuck loops, budgets, failing tools, verify
feedback) use :class:`ScriptedChatModel`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command
from pydantic import BaseModel

from agent import ApprovalPolicy, Limits, build_graph
from agent.approval import is_approval_request
from agent.models import NOT_CONFIGURED, OfflineChatModel
from agent.settings import AgentSettings
from agent.tools import ToolContext, ToolSpec, default_tools, workspace_dir
from api.builtin_agent import BUILTIN_ASSISTANT
from api.builtin_agent.wiring import build_agent
from api.engine.runtime import Runtime
from api.platform.settings import Settings
from tests.utils.graphs import scripted_graph
from tests.utils.scripted_model import ScriptedChatModel, call, calls
from tests.utils.tasks import counter, greet

SNAPSHOTS = Path(__file__).parent / "snapshots"
AUTO = {"*": "auto"}


# --------------------------------------------------------------------------------------------
# helpers


@dataclass
class Outcome:
    """What one streamed run produced."""

    custom: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.custom if e.get("type") == kind]

    @property
    def nodes(self) -> list[str]:
        """Nodes whose updates arrived, in order."""
        return [node for u in self.updates for node in u]


def make_config(
    limits: Limits, *, thread_id: str | None = None, policy: dict[str, str] | None = None
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id or str(uuid.uuid4())}
    if policy is not None:
        configurable["approval_policy"] = policy
    return {"configurable": configurable, "recursion_limit": limits.recursion_limit()}


async def stream(graph: Pregel, graph_input: Any, config: RunnableConfig) -> Outcome:
    out = Outcome()
    async for chunk in graph.astream(
        graph_input, config, stream_mode=["updates", "custom"], durability="sync"
    ):
        mode, data = cast(tuple[str, dict[str, Any]], chunk)
        if mode == "custom":
            out.custom.append(data)
        else:
            out.updates.append(data)
    return out


def workspace(settings: Settings, config: RunnableConfig) -> Path:
    return workspace_dir(settings.data_dir, str((config.get("configurable") or {})["thread_id"]))


def tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# --------------------------------------------------------------------------------------------
# shape


def test_graph_structure_matches_snapshot(tmp_path: Path) -> None:
    graph = build_graph(
        model=OfflineChatModel(), tools=default_tools(), checkpointer=None, data_dir=tmp_path
    )
    drawn = graph.get_graph()
    edges = {(e.source, e.target, e.conditional) for e in drawn.edges}
    assert edges == {
        ("__start__", "agent", True),
        ("__start__", "direct", True),
        ("direct", "tools", True),
        ("direct", "review", True),
        ("agent", "tools", True),
        ("agent", "review", True),
        ("agent", "verify", True),
        ("review", "tools", True),
        ("tools", "agent", True),
        ("tools", "verify", True),
        ("tools", "__end__", True),
        ("verify", "agent", True),
        ("verify", "__end__", True),
    }
    mermaid = drawn.draw_mermaid()
    snapshot = SNAPSHOTS / "graph.mmd"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_text(mermaid)
    if not snapshot.exists():
        pytest.fail(f"{snapshot} is missing: create it with UPDATE_SNAPSHOTS=1 pytest {__file__}")
    assert mermaid == snapshot.read_text(), (
        f"the graph's Mermaid drawing differs from {snapshot}. If the change is intended, "
        f"update the snapshot with UPDATE_SNAPSHOTS=1 pytest {__file__} and review the diff."
    )


# --------------------------------------------------------------------------------------------
# demo tasks on the offline model


async def test_counter_runs_to_verified_with_parallel_calls(
    runtime: Runtime, settings: Settings
) -> None:
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = make_config(AgentSettings().limits)
    out = await stream(graph, counter(4, 0.3), config)

    state = await graph.aget_state(config)
    assert state.next == ()
    assert state.values["status"] == "verified"
    assert state.values["verdict"]["passed"] is True
    assert state.values["verify_attempts"] == 1
    ws = workspace(settings, config)
    lines = (ws / "counter.txt").read_text().split()
    assert sorted(lines, key=int) == ["1", "2", "3", "4"]  # parallel lines land in any order
    attempts = (ws / ".counter-attempts").read_text().splitlines()
    assert len(attempts) == 4 and all(" applied " in a for a in attempts)
    # groups 1 | 2 3 | 4, then the final answer
    assert state.values["step"] == 4
    assert state.values["usage"]["steps"] == 4
    assert state.values["usage"]["tokens"] > 0
    results = tool_messages(state.values["messages"])
    assert len(results) == 4 and all(m.status == "success" for m in results)

    kinds = {e["type"] for e in out.custom}
    assert {"step", "tool_started", "tool_finished", "verify", "budget"} <= kinds
    assert [e["step"] for e in out.of_type("step")] == [1, 2, 3, 4]
    assert out.of_type("verify")[-1]["passed"] is True
    assert out.of_type("verify")[-1]["status"] == "verified"
    assert all("left" in e for e in out.of_type("budget"))
    assert out.nodes[-1] == "verify"

    # Step 2 makes two calls that write (run_command): they run one at a time, in the order
    # the model gave them, and both finish before step 3 starts (agent.concurrency).
    kinds_in_order = [(e["type"], e.get("step")) for e in out.custom]
    start2 = kinds_in_order.index(("step", 2))
    start3 = kinds_in_order.index(("step", 3))
    in_step2 = [t for t, _ in kinds_in_order[start2 + 1 : start3]]
    tool_events = [t for t in in_step2 if t.startswith("tool_")]
    assert tool_events == ["tool_started", "tool_finished", "tool_started", "tool_finished"]


async def test_fix_test_with_auto_policy_runs_to_verified(
    runtime: Runtime, settings: Settings
) -> None:
    graph = build_agent(settings, AgentSettings(approval_policy=AUTO), runtime.saver)
    config = make_config(AgentSettings().limits)
    out = await stream(graph, {"task": {"name": "fix_test"}}, config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "verified"
    assert not state.interrupts
    assert "return a + b" in (workspace(settings, config) / "calc.py").read_text()
    assert "edit_file" in {e["tool"] for e in out.of_type("tool_started")}
    assert "__interrupt__" not in out.nodes


async def test_fix_test_asks_before_editing_then_resumes(
    runtime: Runtime, settings: Settings
) -> None:
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = make_config(AgentSettings().limits)
    out = await stream(graph, {"task": {"name": "fix_test"}}, config)
    calc = workspace(settings, config) / "calc.py"

    interrupted = [u["__interrupt__"] for u in out.updates if "__interrupt__" in u]
    assert len(interrupted) == 1
    state = await graph.aget_state(config)
    assert state.next == ("review",)  # the review node asks; the tools node runs the answer
    pending = [i for t in state.tasks for i in t.interrupts]
    assert len(pending) == 1
    value = pending[0].value
    assert is_approval_request(value)
    (action,) = value["action_requests"]
    assert action["name"] == "edit_file"
    assert action["args"] == {"path": "calc.py", "old": "return a - b", "new": "return a + b"}
    assert "edit_file is not read-only" in action["description"]
    (review,) = value["review_configs"]
    assert review["action_name"] == "edit_file"
    assert review["allowed_decisions"] == ["approve", "edit", "reject"]
    (call_id,) = value["tool_call_ids"]
    assert call_id
    assert value["policies"] == [{"rule": "ask", "source": "default", "server_rule": "ask"}]
    # Asked before any side effect: the edit has not happened and never started.
    assert "return a - b" in calc.read_text()
    assert "edit_file" not in {e["tool"] for e in out.of_type("tool_started")}

    approve = {"decisions": [{"type": "approve"}]}
    resumed = await stream(graph, Command(resume={pending[0].id: approve}), config)
    state = await graph.aget_state(config)
    assert state.values["status"] == "verified"
    assert "return a + b" in calc.read_text()
    assert "edit_file" in {e["tool"] for e in resumed.of_type("tool_started")}
    edits = [m for m in tool_messages(state.values["messages"]) if m.name == "edit_file"]
    assert len(edits) == 1 and edits[0].status == "success"


async def test_rejected_edit_is_not_run_and_the_task_fails(
    runtime: Runtime, settings: Settings
) -> None:
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = make_config(AgentSettings().limits)
    await stream(graph, {"task": {"name": "fix_test"}}, config)
    state = await graph.aget_state(config)
    (pending,) = [i for t in state.tasks for i in t.interrupts]

    answer = {"decisions": [{"type": "reject", "message": "do not touch calc.py"}]}
    await stream(graph, Command(resume={pending.id: answer}), config)
    state = await graph.aget_state(config)
    calc = workspace(settings, config) / "calc.py"
    assert "return a - b" in calc.read_text()
    (edit,) = [m for m in tool_messages(state.values["messages"]) if m.name == "edit_file"]
    assert edit.status == "error"
    assert "do not touch calc.py" in str(edit.content)
    # The tests still fail, so both acceptance checks fail.
    assert state.values["status"] == "failed"
    assert state.values["verify_attempts"] == AgentSettings().limits.max_verify_attempts


async def test_edited_approval_runs_the_edited_arguments(
    runtime: Runtime, settings: Settings
) -> None:
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = make_config(AgentSettings().limits)
    await stream(graph, {"task": {"name": "fix_test"}}, config)
    state = await graph.aget_state(config)
    (pending,) = [i for t in state.tasks for i in t.interrupts]

    edited = {"path": "calc.py", "old": "return a - b", "new": "return b + a"}
    action = {"name": "edit_file", "args": edited}
    answer = {"decisions": [{"type": "edit", "edited_action": action}]}
    resumed = await stream(graph, Command(resume={pending.id: answer}), config)
    assert [e["args"] for e in resumed.of_type("tool_started")][:1] == [edited]
    assert "return b + a" in (workspace(settings, config) / "calc.py").read_text()
    assert (await graph.aget_state(config)).values["status"] == "verified"


async def test_an_invalid_answer_that_reaches_the_graph_runs_nothing(
    runtime: Runtime, settings: Settings
) -> None:
    """The service refuses invalid answers (422); one that reaches the graph anyway (the old
    ``{"decision": ...}`` shape, say) fails closed: the call is not run."""
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = make_config(AgentSettings().limits)
    await stream(graph, {"task": {"name": "fix_test"}}, config)
    state = await graph.aget_state(config)
    (pending,) = [i for t in state.tasks for i in t.interrupts]

    await stream(graph, Command(resume={pending.id: {"decision": "approve"}}), config)
    state = await graph.aget_state(config)
    assert "return a - b" in (workspace(settings, config) / "calc.py").read_text()
    edit = next(m for m in tool_messages(state.values["messages"]) if m.name == "edit_file")
    assert edit.status == "error"
    assert "approval answer was invalid" in str(edit.content)
    assert '{"decisions": [' in str(edit.content)


async def test_parallel_asks_are_one_request_and_each_call_gets_its_own_decision(
    runtime: Runtime, settings: Settings
) -> None:
    """``notes`` writes two files in one step: one interrupt asks about both calls, and the
    answer's two decisions apply each to its own call, in order."""
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = make_config(AgentSettings().limits)
    out = await stream(graph, {"task": {"name": "notes", "params": {}}}, config)
    assert len([u for u in out.updates if "__interrupt__" in u]) == 1
    state = await graph.aget_state(config)
    assert state.next == ("review",)
    (pending,) = state.interrupts
    value = pending.value
    assert [(a["name"], a["args"]["path"]) for a in value["action_requests"]] == [
        ("write_file", "a.txt"),
        ("write_file", "b.txt"),
    ]
    assert len(value["review_configs"]) == 2
    assert len(set(value["tool_call_ids"])) == 2
    assert len(value["policies"]) == 2
    assert not out.of_type("tool_started")  # nothing ran before the answer

    answer = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "not b"}]}
    resumed = await stream(graph, Command(resume={pending.id: answer}), config)
    assert [e["args"]["path"] for e in resumed.of_type("tool_started")] == ["a.txt"]
    ws = workspace(settings, config)
    assert (ws / "a.txt").read_text() == "alpha\n"
    assert not (ws / "b.txt").exists()
    state = await graph.aget_state(config)
    results = {
        m.tool_call_id: m for m in tool_messages(state.values["messages"]) if m.name == "write_file"
    }
    first, second = value["tool_call_ids"]
    assert set(results) == {first, second}
    assert results[first].status == "success"
    assert results[second].status == "error" and "not b" in str(results[second].content)
    assert not state.interrupts


async def test_the_calls_of_a_step_that_asks_run_together_after_the_review(
    runtime: Runtime, settings: Settings
) -> None:
    """When a call of a step asks, the whole step waits for the answer (as LangChain's
    human-in-the-loop middleware does): nothing of it runs first, then every call runs in one
    superstep and the agent takes its next step once."""
    model = ScriptedChatModel(
        replies=[
            calls(call("list_files", path="."), call("write_file", path="x.txt", content="x\n")),
            AIMessage("Done."),
        ]
    )
    graph = scripted_graph(runtime, model)
    config = make_config(Limits())
    out = await stream(graph, ask("List, then write x.txt."), config)
    assert out.of_type("tool_started") == []
    state = await graph.aget_state(config)
    (pending,) = state.interrupts
    # Only the asking call is asked about; the auto one waits with it.
    assert [a["name"] for a in pending.value["action_requests"]] == ["write_file"]
    assert model.calls_made == 1

    approve = {"decisions": [{"type": "approve"}]}
    resumed = await stream(graph, Command(resume={pending.id: approve}), config)
    assert sorted(e["tool"] for e in resumed.of_type("tool_started")) == [
        "list_files",
        "write_file",
    ]
    assert resumed.nodes.count("agent") == 1
    assert model.calls_made == 2
    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    assert sorted(str(m.name) for m in tool_messages(state.values["messages"])) == [
        "list_files",
        "write_file",
    ]
    assert (workspace(settings, config) / "x.txt").read_text() == "x\n"


async def test_freeform_input_on_the_offline_model_says_no_model_is_configured(
    runtime: Runtime, settings: Settings
) -> None:
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = make_config(AgentSettings().limits)
    out = await stream(graph, ask("Write me a poem about PostgreSQL."), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    assert state.values["task"]["name"] == "freeform"
    reply = state.values["messages"][-1]
    assert isinstance(reply, AIMessage)
    assert reply.content == NOT_CONFIGURED
    assert "OPENAI_API_KEY" in reply.content
    assert out.of_type("verify")[-1]["passed"] is None


# --------------------------------------------------------------------------------------------
# guards


async def test_repeating_the_same_call_stops_as_stuck(runtime: Runtime, settings: Settings) -> None:
    limits = Limits()
    model = ScriptedChatModel(
        replies=[lambda _: calls(call("list_files", path="."))], repeat_last=True
    )
    graph = scripted_graph(runtime, model, limits=limits)
    config = make_config(limits)
    out = await stream(graph, ask("List the files, forever."), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "stuck"
    assert model.calls_made == limits.stuck_repeats < limits.max_steps
    assert state.values["step"] == limits.stuck_repeats
    assert out.nodes[-1] == "verify"
    assert out.of_type("verify")[-1]["status"] == "stuck"


async def test_step_limit_stops_a_model_that_never_finishes(
    runtime: Runtime, settings: Settings
) -> None:
    limits = Limits(max_steps=3)
    # Different arguments every time, so it is not "stuck", just endless.
    model = ScriptedChatModel(
        replies=[lambda m: calls(call("read_file", path="notes.txt", offset=len(m)))],
        repeat_last=True,
    )
    graph = scripted_graph(runtime, model, limits=limits)
    config = make_config(limits)
    out = await stream(graph, ask("Read notes.txt, forever."), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "budget_exceeded"
    assert model.calls_made == 3
    assert state.values["usage"]["steps"] == 3
    assert out.nodes[-1] == "verify"
    assert out.of_type("budget")[-1]["left"]["steps"] == 0


async def test_token_budget_stops_the_task(runtime: Runtime, settings: Settings) -> None:
    limits = Limits(max_tokens=1_000)
    model = ScriptedChatModel(
        replies=[lambda m: calls(call("list_files", path="."), tokens=5_000)], repeat_last=True
    )
    graph = scripted_graph(runtime, model, limits=limits)
    config = make_config(limits)
    out = await stream(graph, ask("Spend tokens."), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "budget_exceeded"
    assert state.values["usage"]["tokens"] == 5_000
    assert model.calls_made == 1
    assert out.of_type("budget")[-1]["left"]["tokens"] == 1_000 - 5_000


# --------------------------------------------------------------------------------------------
# verify


def greet_write(text: str) -> AIMessage:
    return calls(call("write_file", path="greeting.txt", content=text))


async def test_failed_check_goes_back_as_feedback_until_fixed(
    runtime: Runtime, settings: Settings
) -> None:
    limits = Limits()
    model = ScriptedChatModel(
        replies=[
            greet_write("Hello, Bob!\n"),
            AIMessage("Done."),
            greet_write("Hello, Ada!\n"),
            AIMessage("Fixed."),
        ]
    )
    graph = scripted_graph(runtime, model, limits=limits, policy=ApprovalPolicy(AUTO))
    config = make_config(limits)
    out = await stream(graph, greet("Ada"), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "verified"
    assert state.values["verify_attempts"] == 2
    assert (workspace(settings, config) / "greeting.txt").read_text() == "Hello, Ada!\n"
    # The third model call saw the failed check as a human message named "verify".
    feedback = model.prompts[2][-1]
    assert isinstance(feedback, HumanMessage) and feedback.name == "verify"
    assert "Hello, Bob!" in str(feedback.content)
    assert [e["passed"] for e in out.of_type("verify")] == [False, True]
    assert [e["status"] for e in out.of_type("verify")] == ["running", "verified"]


async def test_check_that_keeps_failing_ends_failed(runtime: Runtime, settings: Settings) -> None:
    limits = Limits(max_verify_attempts=2)
    model = ScriptedChatModel(
        replies=[greet_write("Hello, Bob!\n"), AIMessage("Done."), AIMessage("Still done.")]
    )
    graph = scripted_graph(runtime, model, limits=limits, policy=ApprovalPolicy(AUTO))
    config = make_config(limits)
    out = await stream(graph, greet("Ada"), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "failed"
    assert state.values["verify_attempts"] == 2
    assert state.values["verdict"]["passed"] is False
    assert "Hello, Bob!" in state.values["verdict"]["output"]
    assert model.calls_made == 3
    assert [e["status"] for e in out.of_type("verify")] == ["running", "failed"]


# --------------------------------------------------------------------------------------------
# tool errors and policy


class NoArgs(BaseModel):
    pass


async def _explode(ctx: ToolContext, args: BaseModel) -> str:
    raise RuntimeError("the flux capacitor is empty")


EXPLODING = ToolSpec(
    name="explode",
    description="Always fails.",
    args_schema=NoArgs,
    read_only=True,
    run=_explode,
)


async def test_a_tool_that_raises_becomes_an_error_message(
    runtime: Runtime, settings: Settings
) -> None:
    limits = Limits()
    model = ScriptedChatModel(replies=[calls(call("explode")), AIMessage("It failed; stopping.")])
    graph = scripted_graph(runtime, model, limits=limits, tools=[*default_tools(), EXPLODING])
    config = make_config(limits)
    out = await stream(graph, ask("Use the explode tool."), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    (result,) = tool_messages(state.values["messages"])
    assert result.status == "error"
    assert "RuntimeError" in str(result.content)
    assert "the flux capacitor is empty" in str(result.content)
    # The run went on: the model saw the error in its next prompt.
    assert model.calls_made == 2
    assert model.prompts[1][-1] == result
    finished = out.of_type("tool_finished")
    assert [(e["tool"], e["ok"]) for e in finished] == [("explode", False)]


async def test_an_unknown_tool_gets_an_error_naming_the_real_ones(
    runtime: Runtime, settings: Settings
) -> None:
    limits = Limits()
    model = ScriptedChatModel(replies=[calls(call("teleport", to="mars")), AIMessage("Oh well.")])
    graph = scripted_graph(runtime, model, limits=limits)
    config = make_config(limits)
    out = await stream(graph, ask("Go to Mars."), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    (result,) = tool_messages(state.values["messages"])
    assert result.status == "error"
    assert "There is no tool named 'teleport'" in str(result.content)
    assert "list_files" in str(result.content) and "run_command" in str(result.content)
    assert out.of_type("tool_started") == []


async def test_a_denied_tool_is_not_run(runtime: Runtime, settings: Settings) -> None:
    limits = Limits()
    model = ScriptedChatModel(
        replies=[
            calls(call("write_file", path="secret.txt", content="x"), call("list_files", path=".")),
            AIMessage("Could not write."),
        ]
    )
    graph = scripted_graph(
        runtime, model, limits=limits, policy=ApprovalPolicy({"write_file": "deny"})
    )
    config = make_config(limits)
    out = await stream(graph, ask("Write secret.txt."), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    assert not state.interrupts
    results = {m.name: m for m in tool_messages(state.values["messages"])}
    assert results["write_file"].status == "error"
    assert "denied" in str(results["write_file"].content)
    assert results["list_files"].status == "success"
    assert not (workspace(settings, config) / "secret.txt").exists()
    assert [e["tool"] for e in out.of_type("tool_started")] == ["list_files"]


# --------------------------------------------------------------------------------------------
# durability of parallel tool tasks


FAST = "open('fast.log', 'a').write('ran\\n')"
SLOW = (
    "import os, time; open('slow.log', 'a').write('start\\n'); deadline = time.time() + 30\n"
    "while not os.path.exists('release') and time.time() < deadline: time.sleep(0.02)\n"
    "open('slow.log', 'a').write('end\\n')"
)
"""Runs until the test creates ``release``: the cancel always lands while it runs."""


@pytest.mark.slow
async def test_a_finished_parallel_call_is_not_run_again_after_cancellation(
    runtime: Runtime, settings: Settings
) -> None:
    """Cancel mid-step while one of two parallel calls has finished: resume runs only the other."""
    limits = Limits()
    fast = call("run_command", command=["python", "-c", FAST])
    slow = call("run_command", command=["python", "-c", SLOW])
    model = ScriptedChatModel(replies=[calls(fast, slow), AIMessage("Both ran.")])
    graph = scripted_graph(runtime, model, limits=limits, policy=ApprovalPolicy(AUTO))
    config = make_config(limits)
    ws = workspace(settings, config)

    fast_saved = asyncio.Event()

    async def first_attempt() -> None:
        async for chunk in graph.astream(
            ask("Run both."), config, stream_mode=["updates", "custom"], durability="sync"
        ):
            mode, data = cast(tuple[str, dict[str, Any]], chunk)
            tools_update = data.get("tools") if mode == "updates" else None
            if tools_update and any(m.tool_call_id == fast["id"] for m in tools_update["messages"]):
                fast_saved.set()

    task = asyncio.create_task(first_attempt())
    await asyncio.wait_for(fast_saved.wait(), 30)
    slow_log = ws / "slow.log"
    for _ in range(1500):  # until the slow call has started (it then waits for "release")
        if slow_log.exists():
            break
        await asyncio.sleep(0.02)
    else:
        pytest.fail("the slow call did not start within 30 s")
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    state = await graph.aget_state(config)
    assert state.next == ("tools",)
    assert "end" not in slow_log.read_text()

    (ws / "release").touch()
    await stream(graph, None, config)
    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"
    assert (ws / "fast.log").read_text() == "ran\n"  # finished before the cancel: not re-run
    assert (ws / "slow.log").read_text().count("start") == 2  # unfinished: run again
    results = tool_messages(state.values["messages"])
    assert sorted(m.tool_call_id for m in results) == sorted([str(fast["id"]), str(slow["id"])])
    assert all(m.status == "success" for m in results)
    assert model.calls_made == 2


# --------------------------------------------------------------------------------------------
# direct calls ({"call": ...} input: one tool call without the model)


async def test_a_direct_call_runs_under_the_policy_without_the_model(
    runtime: Runtime, settings: Settings
) -> None:
    model = ScriptedChatModel(replies=[])
    graph = scripted_graph(runtime, model)
    config = make_config(Limits())
    # A read-only call: auto, run at once; the run ends with its result.
    listing = {"call": {"name": "list_files", "args": {"path": "."}, "id": "direct-1"}}
    out = await stream(graph, listing, config)
    assert [e["tool"] for e in out.of_type("tool_finished")] == ["list_files"]
    state = await graph.aget_state(config)
    assert state.next == ()
    assert tool_messages(state.values["messages"])[-1].tool_call_id == "direct-1"
    # A write: asked about first, like the agent's own calls; approved, it runs once.
    writing = {"call": {"name": "write_file", "args": {"path": "d.txt", "content": "d\n"}}}
    await stream(graph, writing, config)
    state = await graph.aget_state(config)
    assert state.next == ("review",)
    (pending,) = state.interrupts
    assert [a["name"] for a in pending.value["action_requests"]] == ["write_file"]
    assert not (workspace(settings, config) / "d.txt").exists()
    approve = {"decisions": [{"type": "approve"}]}
    await stream(graph, Command(resume={pending.id: approve}), config)
    assert (workspace(settings, config) / "d.txt").read_text() == "d\n"
    state = await graph.aget_state(config)
    assert state.next == () and not state.interrupts
    assert model.calls_made == 0  # the model was never asked
