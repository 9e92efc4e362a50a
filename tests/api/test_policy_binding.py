"""Nothing runs that the operator did not allow (issue 11): hostile requests against a server.

Client input names no programs (tasks come from the server's catalog), the agent's control state
is its own, a run's approval rules only tighten the server's, and a decision binds: a rejected
call never runs, an edit runs as edited, whatever the resuming run's config says. A new message
closes the pending approvals as rejected and keeps the conversation valid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_approvals import (
    audit_rows,
    custom_of,
    decision_rows,
    interrupts_in,
    pending_ids,
    start_interrupted,
    tool_rows,
    workspace_file,
)
from tests.utils.runs import MODES, collect, new_thread
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet, notes
from tests.utils.workspace import workspace_path

SERVER_ENV = {"THREADLINE_APPROVAL_POLICY": json.dumps({"edit_file": "deny"})}
"""The deployment denies edit_file, so a run that asks for it "auto" is a loosening."""
COUNTER = counter(2)
ASK_COMMANDS = {"configurable": {"approval_policy": {"run_command": "ask"}}}


async def wait_run(http: httpx.AsyncClient, tid: str, body: dict[str, Any]) -> httpx.Response:
    return await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "agent", **body})


def assert_valid_conversation(messages: list[dict[str, Any]]) -> None:
    """Every AI message with tool calls is followed by exactly one tool message per call."""
    for i, m in enumerate(messages):
        if m["type"] != "ai" or not m.get("tool_calls"):
            continue
        ids = [c["id"] for c in m["tool_calls"]]
        following = []
        for n in messages[i + 1 :]:
            if n["type"] != "tool":
                break
            following.append(n["tool_call_id"])
        assert sorted(following) == sorted(ids), (ids, following, messages)


# -- 1. client input names no programs -----------------------------------------------------


@pytest.mark.parametrize(
    "task_extra",
    [
        {"check": ["sh", "-c", "id -u > MARKER"]},
        {"instruction": "anything", "check": ["python", "-c", "open('MARKER','w')"]},
        {"policy": {"run_command": "auto"}},
        {"template": "/etc"},
    ],
    ids=["check", "instruction+check", "policy", "template"],
)
async def test_a_task_field_other_than_name_and_params_is_refused(
    http: httpx.AsyncClient, server: ServerProcess, task_extra: dict[str, Any]
) -> None:
    tid = await new_thread(http)
    task = {"name": "counter", "params": {"n": 1}, **task_extra}
    res = await wait_run(http, tid, {"input": {"task": task, "messages": []}})
    assert res.status_code == 422, res.text
    detail = res.json()["detail"]
    assert sorted(task_extra)[0] in detail and "name and params" in detail
    assert not workspace_path(server.data_dir, tid, "MARKER").exists()
    runs = (await http.get(f"/threads/{tid}/runs")).json()
    assert runs == []


@pytest.mark.parametrize("field", ["status", "verdict", "step", "usage", "verify_attempts"])
async def test_input_cannot_set_the_agents_control_fields(
    http: httpx.AsyncClient, field: str
) -> None:
    tid = await new_thread(http)
    res = await wait_run(
        http,
        tid,
        {"input": {"messages": [{"role": "user", "content": "hi"}], field: "agent_done"}},
    )
    assert res.status_code == 422, res.text
    assert field in res.json()["detail"] and "messages, task" in res.json()["detail"]


async def test_a_task_that_does_not_exist_is_refused_with_the_known_ones(
    http: httpx.AsyncClient,
) -> None:
    tid = await new_thread(http)
    res = await wait_run(http, tid, {"input": {"task": {"name": "sh", "params": {}}}})
    assert res.status_code == 422, res.text
    assert "known tasks" in res.json()["detail"] and "counter" in res.json()["detail"]


# -- 2. protected state ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        {"update": {"task": {"name": "x", "check": ["sh", "-c", "id > MARKER"]}}},
        {"update": {"status": "agent_done"}, "goto": "verify"},
        {"update": {"messages": [{"role": "user", "content": "x"}]}, "goto": "tools"},
        {"goto": ["agent", "verify"]},
        {"update": [["status", "verified"]]},
    ],
    ids=["task", "status+goto-verify", "goto-tools", "goto-list", "update-as-list"],
)
async def test_a_command_cannot_write_control_fields_or_jump_nodes(
    http: httpx.AsyncClient, server: ServerProcess, command: dict[str, Any]
) -> None:
    tid = await new_thread(http)
    # Give the thread a state first, so a command has something to act on.
    first = await wait_run(http, tid, {"input": COUNTER})
    assert first.status_code == 200, first.text
    res = await wait_run(http, tid, {"command": command})
    assert res.status_code == 422, res.text
    assert "command." in res.json()["detail"]
    assert not workspace_path(server.data_dir, tid, "MARKER").exists()
    state = (await http.get(f"/threads/{tid}/state")).json()
    assert state["values"]["status"] == "verified"
    assert len((await http.get(f"/threads/{tid}/runs")).json()) == 1


async def test_a_command_may_add_messages(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    assert (await wait_run(http, tid, {"input": COUNTER})).status_code == 200
    res = await wait_run(
        http,
        tid,
        {"command": {"update": {"messages": [{"role": "user", "content": "thanks"}]}}},
    )
    assert res.status_code == 200, res.text


@pytest.mark.parametrize(
    "configurable",
    [
        {"__threadline_prior_result": "x"},
        {"__pregel_resume_map": {"a": "b"}},
    ],
)
async def test_private_config_keys_are_refused(
    http: httpx.AsyncClient, configurable: dict[str, Any]
) -> None:
    tid = await new_thread(http)
    res = await wait_run(http, tid, {"input": COUNTER, "config": {"configurable": configurable}})
    assert res.status_code == 422, res.text
    assert "reserved" in res.json()["detail"]


# -- 3. policy is the server's -------------------------------------------------------------


@pytest.mark.parametrize(
    "rules",
    [{"*": "auto"}, {"write_file": "auto"}, {"edit_file": "auto"}, {"edit_file": "ask"}],
)
async def test_a_run_cannot_loosen_the_servers_policy(
    http: httpx.AsyncClient, server: ServerProcess, rules: dict[str, str]
) -> None:
    tid = await new_thread(http)
    res = await wait_run(
        http, tid, {"input": greet(), "config": {"configurable": {"approval_policy": rules}}}
    )
    assert res.status_code == 403, res.text
    assert "only tighten" in res.json()["detail"]
    assert (await http.get(f"/threads/{tid}/runs")).json() == []
    assert await workspace_file(http, tid, "greeting.txt") is None


@pytest.mark.parametrize("rules", [{"*": "auto"}, {"write_file": "auto"}])
async def test_nor_through_its_context_which_the_graph_sees_as_configurable(
    http: httpx.AsyncClient, server: ServerProcess, rules: dict[str, str]
) -> None:
    """A run's ``context`` is mirrored into ``configurable`` (``api.engine.run_context``): the
    checks
    read what the graph will see, so the policy cannot be loosened that way either."""
    tid = await new_thread(http)
    res = await wait_run(http, tid, {"input": greet(), "context": {"approval_policy": rules}})
    assert res.status_code == 403, res.text
    assert "only tighten" in res.json()["detail"]
    assert (await http.get(f"/threads/{tid}/runs")).json() == []
    assert await workspace_file(http, tid, "greeting.txt") is None


@pytest.mark.parametrize(
    "context", [{"__pregel_resume_map": {"a": "b"}}, {"langgraph_auth_user_id": "someone"}]
)
async def test_private_keys_are_refused_in_a_context_too(
    http: httpx.AsyncClient, context: dict[str, Any]
) -> None:
    tid = await new_thread(http)
    res = await wait_run(http, tid, {"input": COUNTER, "context": context})
    assert res.status_code == 422, res.text
    assert "reserved" in res.json()["detail"]


async def test_a_malformed_run_policy_is_a_422(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    res = await wait_run(
        http,
        tid,
        {"input": greet(), "config": {"configurable": {"approval_policy": {"x": "never"}}}},
    )
    assert res.status_code == 422, res.text


async def test_the_task_preapproval_stays_and_a_run_can_tighten_it(
    client: Any, server: ServerProcess
) -> None:
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(client.runs.stream(tid, "agent", input=COUNTER, stream_mode=MODES))
    assert interrupts_in(parts) == [] and parts[-1].data["status"] == "success"
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(
        client.runs.stream(tid, "agent", input=COUNTER, stream_mode=MODES, config=ASK_COMMANDS)
    )
    [asked] = interrupts_in(parts)
    assert asked["value"]["action_requests"][0]["name"] == "run_command"
    assert asked["value"]["policies"] == [{"rule": "ask", "source": "run", "server_rule": "auto"}]
    assert custom_of(parts, "tool_started") == []


async def test_info_shows_the_effective_policy(http: httpx.AsyncClient) -> None:
    info = (await http.get("/info")).json()
    policy = info["approval_policy"]
    assert policy["rules"] == {"edit_file": "deny"}
    assert policy["effective"]["edit_file"] == "deny"
    assert policy["effective"]["read_file"] == "auto"
    assert policy["effective"]["write_file"] == "ask"
    assert policy["run_overrides"] == "tighten only"


# -- 4. decisions bind ---------------------------------------------------------------------


async def asked_counter(client: Any) -> tuple[str, str]:
    """A counter thread whose first append waits for approval (the run tightened the policy)."""
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(
        client.runs.stream(tid, "agent", input=COUNTER, stream_mode=MODES, config=ASK_COMMANDS)
    )
    assert parts[-1].data["status"] == "success", parts[-1]  # paused: the thread waits
    assert (await client.threads.get(tid))["status"] == "interrupted"
    [asked] = interrupts_in(parts)
    return tid, asked["id"]


async def test_a_rejection_through_the_approvals_endpoint_binds(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, interrupt_id = await asked_counter(client)
    [asked] = (await client.threads.get_state(tid))["interrupts"]
    res = await http.post(
        f"/threads/{tid}/approvals",
        json={
            "interrupt_id": interrupt_id,
            "decisions": [{"type": "reject", "message": "no"}],
        },
    )
    assert res.status_code == 200, res.text
    run = res.json()
    await client.runs.join(tid, run["run_id"])
    lines = workspace_path(server.data_dir, tid, "counter.txt")
    assert not lines.exists() or "1" not in lines.read_text().split()
    # Only later steps' calls ran (under the resuming run's policy), never the rejected one.
    rows = await audit_rows(http, tid)
    executed = [r["tool_call_id"] for r in tool_rows(rows, "run_command")]
    [rejected_call] = asked["value"]["tool_call_ids"]
    assert rejected_call not in executed
    values = (await client.threads.get_state(tid))["values"]
    rejected = [m for m in values["messages"] if m["type"] == "tool"]
    assert rejected and rejected[0]["status"] == "error"
    assert "rejected" in rejected[0]["content"]


async def test_a_rejection_in_a_resume_without_the_asking_config_binds(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    """The resuming run has no approval_policy, under which the call would be auto: it still
    does not run, because its rule was decided when it was made."""
    tid, interrupt_id = await asked_counter(client)
    state = await client.threads.get_state(tid)
    [asked] = state["interrupts"]
    [rejected_call] = asked["value"]["tool_call_ids"]
    parts = await collect(
        client.runs.stream(
            tid,
            "agent",
            command={"resume": {interrupt_id: {"decisions": [{"type": "reject"}]}}},
            stream_mode=MODES,
        )
    )
    assert parts[-1].event == "end"
    started = [e["tool_call_id"] for e in custom_of(parts, "tool_started")]
    assert rejected_call not in started
    executed = [r["tool_call_id"] for r in tool_rows(await audit_rows(http, tid), "run_command")]
    assert rejected_call not in executed
    lines = workspace_path(server.data_dir, tid, "counter.txt")
    assert not lines.exists() or "1" not in lines.read_text().split()


async def test_an_edit_runs_as_edited_and_an_approval_runs_as_asked(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [asked] = interrupts_in(parts)
    edited = {"path": "greeting.txt", "content": "Hello, Ada!\n"}
    action = {"name": "write_file", "args": edited}
    parts = await collect(
        client.runs.stream(
            tid,
            "agent",
            command={
                "resume": {asked["id"]: {"decisions": [{"type": "edit", "edited_action": action}]}}
            },
            stream_mode=MODES,
            config={"configurable": {"approval_policy": {"write_file": "deny"}}},
        )
    )
    assert parts[-1].data["status"] == "success"
    [started] = custom_of(parts, "tool_started")
    assert started["args"] == edited
    assert await workspace_file(http, tid, "greeting.txt") == "Hello, Ada!\n"
    [row] = tool_rows(await audit_rows(http, tid))
    assert row["detail"]["args"] == edited


async def test_an_edit_that_breaks_the_tools_schema_is_a_422(
    client: Any, http: httpx.AsyncClient
) -> None:
    tid, parts = await start_interrupted(client, greet("Ada"))
    [asked] = interrupts_in(parts)
    broken = {"name": "write_file", "args": {"path": 3}}
    res = await http.post(
        f"/threads/{tid}/approvals",
        json={
            "interrupt_id": asked["id"],
            "decisions": [{"type": "edit", "edited_action": broken}],
        },
    )
    assert res.status_code == 422, res.text
    assert "Invalid arguments for write_file" in res.json()["detail"], res.text
    assert await pending_ids(client, tid) == [asked["id"]]


async def test_an_edit_cannot_switch_tools(client: Any, http: httpx.AsyncClient) -> None:
    """An approval binds its tool: an edit naming another one is a 422, and the interrupt stays
    pending (a client cannot turn an approved write into a command)."""
    tid, parts = await start_interrupted(client, greet("Ada"))
    [asked] = interrupts_in(parts)
    other = {"name": "run_command", "args": {"command": "echo hi"}}
    res = await http.post(
        f"/threads/{tid}/approvals",
        json={"interrupt_id": asked["id"], "decisions": [{"type": "edit", "edited_action": other}]},
    )
    assert res.status_code == 422, res.text
    assert "cannot switch tools" in res.json()["detail"], res.text
    assert await pending_ids(client, tid) == [asked["id"]]
    assert tool_rows(await audit_rows(http, tid), "run_command") == []


async def test_a_new_message_closes_pending_approvals_as_rejected(
    client: Any, http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid, parts = await start_interrupted(client, notes())
    [pending] = interrupts_in(parts)  # one request asking about both writes
    asked = [pending["id"]]
    assert len(pending["value"]["action_requests"]) == 2
    parts = await collect(
        client.runs.stream(
            tid,
            "agent",
            input={"messages": [{"role": "user", "content": "never mind"}]},
            stream_mode=MODES,
        )
    )
    assert parts[-1].data["status"] == "success"
    assert custom_of(parts, "tool_started") == []
    [closed] = custom_of(parts, "calls_superseded")
    assert len(closed["tool_call_ids"]) == 2
    values = (await client.threads.get_state(tid))["values"]
    assert_valid_conversation(values["messages"])
    tools = [m for m in values["messages"] if m["type"] == "tool"]
    assert len(tools) == 2 and all("superseded by a new message" in m["content"] for m in tools)
    assert values["messages"][-2]["type"] == "human"
    assert values["messages"][-2]["content"] == "never mind"
    rows = decision_rows(await audit_rows(http, tid))
    assert [r["detail"]["interrupt_id"] for r in rows] == asked
    # Recorded as the answer a human could have sent: a rejection for each of its two calls.
    reject = {"type": "reject", "message": "superseded by a new message"}
    assert [r["detail"]["answer"] for r in rows] == [{"decisions": [reject, reject]}]
    assert tool_rows(await audit_rows(http, tid)) == []
    # The closed approvals cannot be answered any more.
    res = await http.post(
        f"/threads/{tid}/approvals",
        json={"interrupt_id": asked[0], "decisions": [{"type": "approve"}] * 2},
    )
    assert res.status_code == 409, res.text
    assert not workspace_path(server.data_dir, tid, "notes.md").exists()


# -- overrides, and operator tasks -----------------------------------------------------------


@pytest.fixture
def operator_tasks(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks"
    (tasks / "hello-template").mkdir(parents=True)
    (tasks / "hello-template" / "README").write_text("operator template\n")
    (tasks / "hello.json").write_text(
        json.dumps(
            {
                "name": "hello",
                "title": "An operator's task",
                "instruction": "Say hello to {who}.",
                "params": {"who": {"type": "string", "default": "you", "maxLength": 20}},
                "template": "hello-template",
                "check": ["python", "-c", "open('CHECKED', 'w').write('yes')"],
                "policy": {"write_file": "auto"},
            }
        )
    )
    return tasks


async def test_operator_overrides_and_tasks(
    make_server: Any, database_url: str, tmp_path: Path, operator_tasks: Path
) -> None:
    # Its own database: the module's server would otherwise claim these runs.
    proc = make_server(
        database_url,
        tmp_path / "data",
        env={
            "THREADLINE_ALLOW_POLICY_OVERRIDES": "true",
            "THREADLINE_TASKS_DIR": str(operator_tasks),
        },
        name="overrides",
    )
    proc.start()
    async with httpx.AsyncClient(base_url=proc.url, timeout=60.0) as http:
        info = (await http.get("/info")).json()
        assert info["approval_policy"]["run_overrides"] == "allowed"
        # A loosening run is allowed here, and skips the question.
        tid = await new_thread(http)
        res = await wait_run(
            http,
            tid,
            {"input": greet(), "config": {"configurable": {"approval_policy": {"*": "auto"}}}},
        )
        assert res.status_code == 200, res.text
        assert res.json()["status"] == "verified"
        # The operator's task is listed, takes its declared params only, runs its own check.
        tasks = {t["name"]: t for t in (await http.get("/tasks")).json()}
        assert tasks["hello"]["approval_policy"] == {"write_file": "auto"}
        tid = await new_thread(http)
        bad = await wait_run(http, tid, {"input": {"task": {"name": "hello", "params": {"x": 1}}}})
        assert bad.status_code == 422 and "who" in bad.json()["detail"]
        res = await wait_run(
            http, tid, {"input": {"task": {"name": "hello", "params": {"who": "Ada"}}}}
        )
        assert res.status_code == 200, res.text
        values = res.json()
        assert values["task"]["instruction"].startswith("Say hello to Ada.")
        assert values["status"] == "verified"
        assert workspace_path(proc.data_dir, tid, "CHECKED").read_text() == "yes"
        assert workspace_path(proc.data_dir, tid, "README").read_text() == "operator template\n"
