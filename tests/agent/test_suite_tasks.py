"""Every catalog task's offline plan solves it through the real compiled graph (PostgreSQL saver).

Also: each task's check fails on its untouched template (so a pass means the plan did the work),
the feedback-loop tasks pass on their second check, and the approval tasks ask before every write
(with parallel asks pending together) and still finish once each ask is approved.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command

from agent.approval import approval_calls, is_approval_request
from agent.settings import AgentSettings
from agent.tasks import CATALOG
from agent.tools import run_program
from api.builtin_agent import BUILTIN_ASSISTANT
from api.builtin_agent.wiring import build_agent
from api.engine.runtime import Runtime

FEEDBACK_LOOP = {"changelog", "fix_median"}
"""Tasks whose offline plan fails the check once and fixes it after the verify feedback."""
PARAMS: dict[str, dict[str, Any]] = {"counter": {"n": 3, "delay": 0.05}}
PARALLEL_ASKS = {"release_notes": [2], "config_rollout": [3], "scaffold_package": [2, 1]}
"""Approval tasks: how many calls the one approval request of each stop asks about, in order."""


def config_for(policy: dict[str, str] | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": str(uuid.uuid4())}
    if policy is not None:
        configurable["approval_policy"] = policy
    return {"configurable": configurable, "recursion_limit": 200}


async def drive(graph: Pregel, graph_input: Any, config: RunnableConfig) -> list[dict[str, Any]]:
    """Run to the next stop; returns the ``custom`` events."""
    custom: list[dict[str, Any]] = []
    async for mode, data in graph.astream(
        graph_input, config, stream_mode=["updates", "custom"], durability="sync"
    ):
        if mode == "custom":
            custom.append(data)
    return custom


def task_input(name: str) -> dict[str, Any]:
    return {"task": {"name": name, "params": PARAMS.get(name, {})}}


def test_catalog_has_the_suite_kinds_after_the_demos() -> None:
    names = list(CATALOG)
    assert names[:4] == ["counter", "fix_test", "greet", "notes"]
    assert all(CATALOG[n].kind == "demo" for n in names[:4])
    kinds = Counter(t.kind for t in CATALOG.values())
    assert kinds["edit"] >= 4 and kinds["fix"] >= 3 and kinds["approval"] >= 3, kinds
    assert len(names) >= 14
    for task in CATALOG.values():
        if task.kind in ("edit", "fix"):  # unattended: their writes are pre-approved
            assert task.policy.get("edit_file") == "auto", task.name
        if task.kind == "approval":  # the point of them: writes ask
            assert "write_file" not in task.policy and "edit_file" not in task.policy


@pytest.mark.parametrize("name", list(CATALOG))
async def test_check_fails_on_the_untouched_template(name: str, tmp_path: Path) -> None:
    spec = CATALOG[name].materialize(PARAMS.get(name), tmp_path)
    check = spec["check"]
    assert check
    result = await run_program(check, cwd=tmp_path, allowed=[check[0]], timeout=60)
    assert result.exit_code not in (0, None), result.output
    assert result.output.strip(), "a failing check must say why"


@pytest.mark.parametrize("name", list(CATALOG))
async def test_offline_plan_reaches_verified(name: str, runtime: Runtime) -> None:
    auto = AgentSettings(approval_policy={"*": "auto"})
    graph = build_agent(runtime.settings, auto, runtime.saver)
    config = config_for()
    custom = await drive(graph, task_input(name), config)

    state = await graph.aget_state(config)
    values = state.values
    assert not state.interrupts and state.next == ()
    assert values["status"] == "verified", values.get("verdict")
    assert values["verdict"]["passed"] is True
    assert values["usage"]["steps"] > 0 and values["usage"]["tokens"] > 0
    verdicts = [e["passed"] for e in custom if e["type"] == "verify"]
    if name in FEEDBACK_LOOP:
        assert values["verify_attempts"] == 2
        assert verdicts == [False, True]
        feedback = [m for m in values["messages"] if m.type == "human" and m.name == "verify"]
        assert len(feedback) == 1 and "acceptance check failed" in feedback[0].content
    else:
        assert values["verify_attempts"] == 1
        assert verdicts == [True]
    finished = [e for e in custom if e["type"] == "tool_finished"]
    assert finished and all(e["ok"] for e in finished), [e for e in finished if not e["ok"]]


@pytest.mark.parametrize("name", sorted(PARALLEL_ASKS))
async def test_approval_task_asks_before_each_write(name: str, runtime: Runtime) -> None:
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = config_for()  # the deployment's defaults: writes ask
    await drive(graph, task_input(name), config)
    pending_counts = []
    for _ in range(10):
        state = await graph.aget_state(config)
        if not state.interrupts:
            break
        (interrupt,) = state.interrupts  # one request for all the asking calls of a step
        assert is_approval_request(interrupt.value)
        asked = approval_calls(interrupt.value)
        assert {name for name, _ in asked} <= {"write_file", "edit_file"}
        pending_counts.append(len(asked))
        approve = {"decisions": [{"type": "approve"}] * len(asked)}
        await drive(graph, Command(resume={interrupt.id: approve}), config)
    assert pending_counts == PARALLEL_ASKS[name]
    state = await graph.aget_state(config)
    assert state.values["status"] == "verified", state.values.get("verdict")


async def test_rejected_approval_ends_the_task_as_failed(runtime: Runtime) -> None:
    graph = runtime.graphs[BUILTIN_ASSISTANT]
    config = config_for()
    await drive(graph, task_input("release_notes"), config)
    for _ in range(5):
        state = await graph.aget_state(config)
        if not state.interrupts:
            break
        (interrupt,) = state.interrupts
        count = len(interrupt.value["action_requests"])
        reject = {"decisions": [{"type": "reject", "message": "not now"}] * count}
        await drive(graph, Command(resume={interrupt.id: reject}), config)
    values = (await graph.aget_state(config)).values
    assert values["status"] == "failed"
    assert values["verdict"]["passed"] is False
    assert values["verify_attempts"] == 2  # the feedback turn answers without another try


def test_a_template_is_never_copied_through_a_planted_symlink(tmp_path: Path) -> None:
    """A sandboxed command may leave symlinks where template files go; starting the task again
    must replace them, not write through them to files outside the workspace."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "append.py").symlink_to(victim)
    task = CATALOG["counter"]
    task.materialize({"n": 1}, workspace)
    assert victim.read_text() == "keep me\n"
    assert not (workspace / "append.py").is_symlink()
    assert "counter.txt" in (workspace / "append.py").read_text()
    # A planted directory symlink is replaced by a real folder; nothing lands outside.
    (workspace / "docs").symlink_to(outside)
    CATALOG["replace_word"].materialize({}, workspace)
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (workspace / "docs").is_dir() and not (workspace / "docs").is_symlink()
    assert any((workspace / "docs").iterdir())
