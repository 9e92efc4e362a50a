"""The real ``mcp-server-git`` (PyPI, stdio) as an external server of the built-in agent, one
process per call confined to the calling thread's workspace: reads run without a question,
add and commit ask, approval commits exactly once, rejection not at all."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from agent.hooks import PRIOR_RESULT_KEY, RECORD_TOOL_KEY
from agent.settings import AgentSettings
from agent.tools import default_tools, ensure_workspace
from api.builtin_agent.wiring import mcp_servers, open_agent
from api.engine.runtime import Runtime
from api.platform.settings import Settings
from tests.utils.git import commits, git, git_repo
from tests.utils.graphs import scripted_graph
from tests.utils.scripted_model import ScriptedChatModel, call

GIT_SERVER = {
    "command": sys.executable,
    "args": ["-m", "mcp_server_git", "--repository", "{workspace}"],
    "discovery_args": ["-m", "mcp_server_git"],
}


def workspace_repo(settings: Settings, thread_id: str) -> Path:
    return git_repo(ensure_workspace(settings.data_dir, thread_id))


async def run(graph: Any, graph_input: Any, config: Any) -> list[dict[str, Any]]:
    custom: list[dict[str, Any]] = []
    async for mode, data in graph.astream(
        graph_input, config, stream_mode=["custom", "updates"], durability="sync"
    ):
        if mode == "custom":
            custom.append(data)
    return custom


async def agent_with_git(runtime: Runtime, settings: Settings, model: ScriptedChatModel) -> Any:
    # Trusted: its readOnlyHint counts, so status runs alone and add/commit still ask.
    trusted = {**GIT_SERVER, "trusted": True}
    with_git = AgentSettings(mcp_servers={"git": trusted})
    builtin = default_tools()
    (server,) = await mcp_servers(settings, with_git, {t.name for t in builtin})
    assert server.status == "ok", server.error
    return scripted_graph(runtime, model, tools=[*builtin, *server.tools])


def commit_script() -> list[Any]:
    return [
        call("git__git_status", repo_path="."),
        call("git__git_add", repo_path=".", files=["b.txt"]),
        call("git__git_commit", repo_path=".", message="add b"),
        AIMessage("done"),
    ]


async def test_a_read_runs_and_a_commit_asks_then_commits_once(
    runtime: Runtime, settings: Settings
) -> None:
    thread_id = str(uuid.uuid4())
    repo = workspace_repo(settings, thread_id)
    model = ScriptedChatModel(replies=commit_script())
    graph = await agent_with_git(runtime, settings, model)
    recorded: list[dict[str, Any]] = []

    async def record(execution: dict[str, Any]) -> None:
        recorded.append(execution)

    async def no_prior(key: str) -> None:
        return None

    config: Any = {
        "configurable": {
            "thread_id": thread_id,
            RECORD_TOOL_KEY: record,
            PRIOR_RESULT_KEY: no_prior,
        }
    }
    events = await run(graph, {"messages": [HumanMessage("commit b.txt")]}, config)
    started = [e["tool"] for e in events if e.get("type") == "tool_started"]
    assert started == ["git__git_status"]  # the read ran without a question
    state = await graph.aget_state(config)
    status = next(m for m in state.values["messages"] if isinstance(m, ToolMessage))
    assert status.status == "success" and "b.txt" in status.content
    approve = {"decisions": [{"type": "approve"}]}
    for tool in ("git__git_add", "git__git_commit"):  # each asks before it runs
        (pending,) = (await graph.aget_state(config)).interrupts
        assert [a["name"] for a in pending.value["action_requests"]] == [tool]
        assert commits(repo) == 1
        await run(graph, Command(resume={pending.id: approve}), config)
    assert commits(repo) == 2
    assert git(repo, "log", "-1", "--format=%s").strip() == "add b"
    # Audited through the tools node's hook, like a built-in tool, with the server's answer.
    assert [r["tool"] for r in recorded] == ["git__git_status", "git__git_add", "git__git_commit"]
    assert all(r["ok"] for r in recorded)


async def test_a_rejected_commit_is_not_made(runtime: Runtime, settings: Settings) -> None:
    thread_id = str(uuid.uuid4())
    repo = workspace_repo(settings, thread_id)
    graph = await agent_with_git(runtime, settings, ScriptedChatModel(replies=commit_script()))
    config: Any = {"configurable": {"thread_id": thread_id}}
    await run(graph, {"messages": [HumanMessage("commit b.txt")]}, config)
    reject = {"decisions": [{"type": "reject", "message": "no"}]}
    for _ in range(2):  # add, then commit: both rejected
        (pending,) = (await graph.aget_state(config)).interrupts
        await run(graph, Command(resume={pending.id: reject}), config)
    assert not (await graph.aget_state(config)).interrupts
    assert commits(repo) == 1
    assert "b.txt" not in git(repo, "diff", "--cached", "--name-only")


async def test_a_recorded_commit_is_not_sent_again(runtime: Runtime, settings: Settings) -> None:
    """After a crash that lost the checkpoint but not the audit record: the record answers."""
    thread_id = str(uuid.uuid4())
    repo = workspace_repo(settings, thread_id)
    commit = call("git__git_commit", repo_path=".", message="again")
    model = ScriptedChatModel(replies=[commit, AIMessage("done")])
    graph = await agent_with_git(runtime, settings, model)
    keys: list[str] = []

    async def prior(key: str) -> dict[str, Any]:
        keys.append(key)
        return {"ok": True, "content": "Changes committed (recorded earlier)"}

    config: Any = {"configurable": {"thread_id": thread_id, PRIOR_RESULT_KEY: prior}}
    await run(graph, {"messages": [HumanMessage("commit")]}, config)
    (pending,) = (await graph.aget_state(config)).interrupts
    await run(graph, Command(resume={pending.id: {"decisions": [{"type": "approve"}]}}), config)
    assert keys == [f"{thread_id}:{commit['id']}"]
    assert commits(repo) == 1


async def test_info_lists_servers_their_tools_and_failures(
    runtime: Runtime, settings: Settings
) -> None:
    servers = {
        "git": GIT_SERVER,
        "trusted_git": {**GIT_SERVER, "trusted": True},
        "broken": {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]},
    }
    _, adapter = await open_agent(settings, runtime.saver, agent=AgentSettings(mcp_servers=servers))
    info = adapter.describe()["mcp_servers"]
    assert info["broken"]["status"] == "error" and info["broken"]["error"]
    untrusted = {t["name"]: t["read_only"] for t in info["git"]["tools"]}
    trusted = {t["name"]: t["read_only"] for t in info["trusted_git"]["tools"]}
    assert untrusted["git__git_status"] is False and untrusted["git__git_commit"] is False
    assert trusted["trusted_git__git_status"] is True
    assert trusted["trusted_git__git_commit"] is False
    effective = adapter.describe()["approval_policy"]["effective"]
    assert effective["git__git_status"] == "ask"
    assert effective["trusted_git__git_status"] == "auto"
    assert effective["trusted_git__git_add"] == "ask"
    assert "git__git_commit" in adapter.tools
