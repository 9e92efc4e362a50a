"""External MCP servers inside the built-in agent of a real ``threadline serve`` process.

The model is ChatOpenAI against a scripted OpenAI-compatible server (``tests.utils.fake_openai``);
its replies depend only on the tool results it was sent, so a step repeated after a kill asks for
the same call again (same tool-call id).

- stdio: the real ``mcp-server-git`` (PyPI), one process per call in the thread's workspace, a
  git repository made before the run. ``git_status`` (read-only, server trusted) runs without a
  question, ``git_add`` is allowed by the deployment's policy, ``git_commit`` asks; the commit is
  approved over the API and the server SIGKILLed as soon as the approved run is claimed, or right
  after the commit appears in ``git log``. After the restart the run ends, ``git rev-list --count
  HEAD`` shows exactly one new commit, and the audit log records the commit once.
- Streamable HTTP: a second threadline server (``THREADLINE_AUTH=keys``) and its
  ``/threads/{id}/mcp`` endpoint as the first server's external server, with the key in
  ``headers``: its tools are listed in ``/info`` (a wrong key: that server is reported, not
  fatal), and a call's result comes back to the model as the tool message.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.utils.db import fresh_database
from tests.utils.fake_openai import FakeOpenAIServer, ReplyLike, ToolCall
from tests.utils.git import commits, git, git_repo
from tests.utils.keys import create_key
from tests.utils.runs import new_thread
from tests.utils.server import ServerProcess
from tests.utils.workspace import workspace_path

WAIT = 90.0
GIT_SERVER = {
    "command": sys.executable,
    "args": ["-m", "mcp_server_git", "--repository", "{workspace}"],
    "discovery_args": ["-m", "mcp_server_git"],
    "trusted": True,  # its readOnlyHint counts: git_status runs without a question
}
STATUS = ToolCall("git__git_status", {"repo_path": "."}, id="call_status")
ADD = ToolCall("git__git_add", {"repo_path": ".", "files": ["b.txt"]}, id="call_add")
COMMIT = ToolCall("git__git_commit", {"repo_path": ".", "message": "add b"}, id="call_commit")
LOG = ToolCall("git__git_log", {"repo_path": ".", "max_count": 3}, id="call_log")
NOT_SENT_AGAIN = "it was not sent again"


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages", []) if m.get("role") == "tool"]


def git_script(body: dict[str, Any]) -> ReplyLike:
    """status, add, commit, then a final answer: the next step from the results so far. A
    commit whose outcome is unknown (sent before a crash, answer lost) is checked with git_log,
    as the error message asks."""
    steps: list[ReplyLike] = [STATUS, ADD, COMMIT]
    results = tool_results(body)
    if len(results) < len(steps):
        return steps[len(results)]
    if len(results) == len(steps) and NOT_SENT_AGAIN in str(results[-1]["content"]):
        return LOG
    return "Committed b.txt."


def openai_env(model: FakeOpenAIServer) -> dict[str, str]:
    return {"OPENAI_API_KEY": model.api_key, "OPENAI_BASE_URL": model.base_url}


async def wait_for(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
    """Poll ``condition`` every 10 ms until it is true (it may be async)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def run_status(http: httpx.AsyncClient, tid: str, rid: str) -> str:
    return str((await http.get(f"/threads/{tid}/runs/{rid}")).json()["status"])


@pytest.mark.parametrize("moment", ["claimed", "committed"])
async def test_an_approved_commit_survives_a_kill_and_is_made_once(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path, moment: str
) -> None:
    with FakeOpenAIServer(responder=git_script) as model:
        env = {
            **openai_env(model),
            "THREADLINE_MCP_SERVERS": json.dumps({"git": GIT_SERVER}),
            "THREADLINE_APPROVAL_POLICY": json.dumps({"git__git_add": "auto"}),
        }
        server = make_server(database_url, tmp_path / "data", env=env, name="git").start()
        async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:
            info = (await http.get("/info")).json()
            assert info["mcp_servers"]["git"]["status"] == "ok", info["mcp_servers"]
            effective = info["approval_policy"]["effective"]
            assert effective["git__git_status"] == "auto"
            assert effective["git__git_commit"] == "ask"

            tid = await new_thread(http)
            repo = git_repo(workspace_path(server.data_dir, tid))
            first = await http.post(
                f"/threads/{tid}/runs/wait",
                json={
                    "assistant_id": "agent",
                    "input": {"messages": [{"role": "user", "content": "Commit b.txt."}]},
                },
            )
            assert first.status_code == 200, first.text
            values = first.json()
            (interrupt,) = values["__interrupt__"]
            # Only the commit asks; the read ran without a question, the add by policy.
            requests = interrupt["value"]["action_requests"]
            assert [a["name"] for a in requests] == ["git__git_commit"], requests
            tools = [m for m in values["messages"] if m["type"] == "tool"]
            assert [(m["name"], m["status"]) for m in tools] == [
                ("git__git_status", "success"),
                ("git__git_add", "success"),
            ]
            assert "b.txt" in tools[0]["content"]  # untracked, as git status said
            assert commits(repo) == 1

            approved = await http.post(
                f"/threads/{tid}/approvals",
                json={"interrupt_id": interrupt["id"], "decisions": [{"type": "approve"}]},
            )
            assert approved.status_code == 200, approved.text
            rid = approved.json()["run_id"]
            if moment == "claimed":

                async def claimed() -> bool:
                    return await run_status(http, tid, rid) == "running"

                await wait_for(claimed, "the run's claim")
            else:
                await wait_for(lambda: commits(repo) == 2, "the commit in git log")
            server.kill()

        server.start()
        async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:
            joined = await http.get(f"/threads/{tid}/runs/{rid}/join")
            assert joined.status_code == 200, joined.text
            run = (await http.get(f"/threads/{tid}/runs/{rid}")).json()
            assert run["status"] == "success", (run, server.log_tail())
            values = joined.json()
            assert values["status"] == "agent_done", values.get("verdict")
            assert commits(repo) == 2, git(repo, "log", "--oneline")
            assert git(repo, "log", "-1", "--format=%s").strip() == "add b"
            assert git(repo, "status", "--porcelain").strip() == ""
            results = {m["tool_call_id"]: m for m in values["messages"] if m["type"] == "tool"}
            commit = results["call_commit"]
            # Never sent twice (a second git_commit would say "No changes staged"): its answer,
            # recorded or journaled, or, when the kill cut it off, "outcome unknown, not sent
            # again", after which the model checked with git_log.
            if commit["status"] != "success":
                assert moment == "committed" and NOT_SENT_AGAIN in commit["content"], commit
                assert "add b" in results["call_log"]["content"]
            else:
                assert "call_log" not in results
            rows = (await http.get(f"/threads/{tid}/audit")).json()
            committed = [r for r in rows if r["kind"] == "tool" and r["tool"] == "git__git_commit"]
            assert len(committed) == 1, committed
            assert committed[0]["tool_call_id"] == "call_commit"
            assert sum(r["kind"] == "decision" for r in rows) == 1
            assert [r["tool"] for r in rows if r["kind"] == "tool"][:2] == [
                "git__git_status",
                "git__git_add",
            ]


async def test_a_streamable_http_server_with_headers(
    make_server: Callable[..., ServerProcess],
    database_url: str,
    pg_admin_url: str,
    tmp_path: Path,
) -> None:
    """The second server's ``/threads/{id}/mcp`` as ``peer``: its tools become ``peer__*``."""
    with fresh_database(pg_admin_url) as peer_database:
        peer_data = tmp_path / "peer"
        peer = make_server(
            peer_database, peer_data, env={"THREADLINE_AUTH": "keys"}, name="peer"
        ).start()
        key = await asyncio.to_thread(create_key, peer_data, peer_database, "alice")
        async with httpx.AsyncClient(
            base_url=peer.url, headers={"x-api-key": key}, timeout=WAIT
        ) as peer_http:
            peer_tid = await new_thread(peer_http)
        workspace_path(peer_data, peer_tid).mkdir(parents=True, exist_ok=True)
        workspace_path(peer_data, peer_tid, "hello.txt").write_text("hello from the peer\n")
        endpoint = f"{peer.url}/threads/{peer_tid}/mcp"
        servers = {
            "peer": {"url": endpoint, "headers": {"x-api-key": key}, "trusted": True},
            "nokey": {"url": endpoint, "headers": {"x-api-key": "tl_0000_wrong"}, "timeout": 10},
        }

        def script(body: dict[str, Any]) -> ReplyLike:
            if not tool_results(body):
                return ToolCall("peer__read_file", {"path": "hello.txt"}, id="call_read")
            return "The file says hello."

        with FakeOpenAIServer(responder=script) as model:
            env = {**openai_env(model), "THREADLINE_MCP_SERVERS": json.dumps(servers)}
            server = make_server(database_url, tmp_path / "data", env=env, name="main").start()
            async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:
                info = (await http.get("/info")).json()
                listed = info["mcp_servers"]
                assert listed["peer"]["status"] == "ok", listed["peer"]
                assert listed["peer"]["transport"] == "http"
                tools = {t["name"]: t for t in listed["peer"]["tools"]}
                assert {"peer__read_file", "peer__write_file", "peer__run_command"} <= set(tools)
                assert tools["peer__read_file"]["remote_name"] == "read_file"
                assert tools["peer__read_file"]["read_only"] is True
                assert tools["peer__write_file"]["read_only"] is False
                # Without the right header the peer refuses: that server is reported, not fatal.
                assert listed["nokey"]["status"] == "error" and listed["nokey"]["error"]
                assert listed["nokey"]["tools"] == []
                effective = info["approval_policy"]["effective"]
                assert effective["peer__read_file"] == "auto"
                assert effective["peer__write_file"] == "ask"

                tid = await new_thread(http)
                res = await http.post(
                    f"/threads/{tid}/runs/wait",
                    json={
                        "assistant_id": "agent",
                        "input": {"messages": [{"role": "user", "content": "Read hello.txt."}]},
                    },
                )
                assert res.status_code == 200, res.text
                values = res.json()
                assert values["status"] == "agent_done", values
                (message,) = [m for m in values["messages"] if m["type"] == "tool"]
                assert message["name"] == "peer__read_file" and message["status"] == "success"
                assert "hello from the peer" in message["content"]
            # The model was sent the peer's answer as the tool message.
            sent = [m for r in model.requests for m in tool_results(r)]
            assert sent and all("hello from the peer" in m["content"] for m in sent)
            assert {m["tool_call_id"] for m in sent} == {"call_read"}

        # The peer ran the call as the key's identity, with the call's idempotency key.
        async with httpx.AsyncClient(
            base_url=peer.url, headers={"x-api-key": key}, timeout=WAIT
        ) as peer_http:
            rows = (await peer_http.get(f"/threads/{peer_tid}/audit")).json()
        reads = [r for r in rows if r["kind"] == "tool" and r["tool"] == "read_file"]
        assert len(reads) == 1, rows
        assert reads[0]["actor"] == "alice"
        peer.stop()
