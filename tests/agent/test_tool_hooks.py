"""The tools node's hooks: every execution is recorded before its result is checkpointed, and a
call that already executed (recorded, but its result lost with a killed process) is not run
again: its recorded result is returned."""

from __future__ import annotations

import uuid
from typing import Any

from agent.nodes.tool_call import PRIOR_RESULT_KEY, RECORD_TOOL_KEY
from agent.settings import AgentSettings
from api.builtin_agent.wiring import build_agent


async def test_a_recorded_call_is_not_executed_again(runtime: Any, settings: Any) -> None:
    graph = build_agent(settings, AgentSettings(approval_policy={"*": "auto"}), runtime.saver)
    thread_id = str(uuid.uuid4())
    asked: list[str] = []
    recorded: list[dict[str, Any]] = []

    async def prior(key: str) -> dict[str, Any] | None:
        asked.append(key)
        return {"ok": True, "content": "Wrote 14 bytes to greeting.txt (recorded earlier)"}

    async def record(finished: dict[str, Any]) -> None:
        recorded.append(finished)

    config: Any = {
        "configurable": {
            "thread_id": thread_id,
            PRIOR_RESULT_KEY: prior,
            RECORD_TOOL_KEY: record,
        }
    }
    custom: list[dict[str, Any]] = []
    async for mode, data in graph.astream(
        {"task": {"name": "greet", "params": {"name": "Ada"}}},
        config,
        stream_mode=["custom", "updates"],
        durability="sync",
    ):
        if mode == "custom":
            custom.append(data)
    state = await graph.aget_state(config)

    call_id = next(m for m in state.values["messages"] if m.type == "ai").tool_calls[0]["id"]
    assert asked == [f"{thread_id}:{call_id}"]
    # Not executed: nothing written, nothing recorded again, no tool_started.
    assert not (settings.data_dir / "workspaces" / thread_id / "greeting.txt").exists()
    assert recorded == []
    assert not [e for e in custom if e.get("type") == "tool_started"]
    finished = [e for e in custom if e.get("type") == "tool_finished"]
    assert finished and finished[0]["replayed"] is True
    tool_message = next(m for m in state.values["messages"] if m.type == "tool")
    assert tool_message.content.endswith("(recorded earlier)")


async def test_an_execution_is_recorded_with_its_whole_result(runtime: Any, settings: Any) -> None:
    graph = build_agent(settings, AgentSettings(approval_policy={"*": "auto"}), runtime.saver)
    thread_id = str(uuid.uuid4())
    recorded: list[dict[str, Any]] = []

    async def none(key: str) -> None:
        return None

    async def record(finished: dict[str, Any]) -> None:
        recorded.append(finished)

    config: Any = {
        "configurable": {
            "thread_id": thread_id,
            PRIOR_RESULT_KEY: none,
            RECORD_TOOL_KEY: record,
        }
    }
    async for _ in graph.astream(
        {"task": {"name": "greet", "params": {"name": "Ada"}}}, config, durability="sync"
    ):
        pass
    assert (settings.data_dir / "workspaces" / thread_id / "greeting.txt").read_text() == (
        "Hello, Ada!\n"
    )
    assert [r["tool"] for r in recorded] == ["write_file"]
    assert recorded[0]["result"] == "Wrote 12 bytes to greeting.txt"
    assert recorded[0]["args"] == {"path": "greeting.txt", "content": "Hello, Ada!\n"}
