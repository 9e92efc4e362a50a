"""The whole agent on the OpenAI path: ChatOpenAI against a local OpenAI-compatible server.

The run streams ``messages`` too, so langchain-openai streams the completions (tool-call
arguments arrive in fragments) exactly as it would against a real endpoint.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import SecretStr

from agent.settings import AgentSettings
from api.builtin_agent.wiring import build_agent
from api.platform.settings import Settings
from tests.utils.fake_openai import FakeOpenAIServer, Reply, ToolCall


async def test_agent_runs_tools_through_an_openai_compatible_server(
    settings: Settings, runtime: Any
) -> None:
    with FakeOpenAIServer(
        [
            Reply(
                content="Writing both files.",
                tool_calls=(
                    ToolCall("write_file", {"path": "a.txt", "content": "one\n"}),
                    ToolCall("write_file", {"path": "b.txt", "content": "two\n"}),
                ),
                prompt_tokens=100,
                completion_tokens=20,
            ),
            Reply(content="Both files are written.", prompt_tokens=150, completion_tokens=5),
        ]
    ) as server:
        agent = AgentSettings(
            openai_api_key=SecretStr(server.api_key),
            openai_base_url=server.base_url,
            approval_policy={"*": "auto"},
        )
        graph = build_agent(settings, agent, runtime.saver)
        thread_id = str(uuid.uuid4())
        config: Any = {
            "configurable": {"thread_id": thread_id, "approval_policy": {"*": "auto"}},
            "recursion_limit": 50,
        }
        modes: list[str] = []
        async for mode, _ in graph.astream(
            {"messages": [{"role": "user", "content": "write a.txt and b.txt"}]},
            config,
            stream_mode=["updates", "messages", "custom"],
            durability="sync",
        ):
            modes.append(mode)
        state = await graph.aget_state(config)

    values = state.values
    assert values["status"] == "agent_done"
    assert values["usage"]["tokens"] == 275  # 120 + 155, from the server's usage chunks
    workspace = settings.data_dir / "workspaces" / thread_id
    assert (workspace / "a.txt").read_text() == "one\n"
    assert (workspace / "b.txt").read_text() == "two\n"
    tool_messages = [m for m in values["messages"] if m.type == "tool"]
    assert sorted(m.status for m in tool_messages) == ["success", "success"]
    assert "messages" in modes  # token streaming reached the graph's stream
    # The second request carried both tool results back, matched by tool_call_id.
    second = server.requests[1]
    ids = {m.get("tool_call_id") for m in second["messages"] if m["role"] == "tool"}
    first_calls = {c["id"] for c in values["messages"][1].tool_calls}
    assert ids == first_calls
    assert second["stream"] is True
    assert {t["function"]["name"] for t in second["tools"]} >= {"write_file", "run_command"}
