"""One approval, five doors: an interrupt raised by a task started over A2A (the official
``a2a-sdk`` client, ``greet()``: it stops at input-required on ``write_file``) is answered once,
through any door — the next A2A message, ``POST /threads/{id}/approvals``, a
``command.resume`` run of the official ``langgraph-sdk`` client, an AG-UI ``resume`` and the
``/mcp`` assistant tool with ``command`` (the official ``mcp`` client) — and every other door,
then and after the resumed run ended, refuses the same answer with its own clear error (409,
a JSON-RPC error, an ``isError`` result: never a 500). The A2A task follows the run that
resumed it whichever door answered, and ends completed; the audit log holds one decision
(``actor``, ``detail.via``) and one ``write_file``. Also: the five answering at the same moment
(one wins), tenants (THREADLINE_AUTH=keys: bob cannot answer alice's task anywhere), and the
task taking only its own answers (a later run on its thread is no part of it; its push
notification says completed when another door answered).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from tests.api.test_a2a import a2a, data_message
from tests.api.test_a2a_push import outbox, pushed
from tests.api.test_mcp_server import mcp_session, text
from tests.utils.keys import create_key
from tests.utils.server import ServerProcess
from tests.utils.tasks import greet
from tests.utils.webhook_receiver import eventually, receiving

pytestmark = pytest.mark.timeout(120)

SERVER_ENV = {"THREADLINE_WEBHOOK_ALLOW_PRIVATE": "true"}
"""The push notification receiver listens on 127.0.0.1."""

APPROVE = {"decisions": [{"type": "approve"}]}
DOORS = ["a2a", "approvals", "sdk", "ag-ui", "mcp"]
VIA = {"a2a": "a2a", "approvals": "http", "sdk": "http", "ag-ui": "ag-ui", "mcp": "mcp"}
"""Each door's ``detail.via`` in the audit log (the LangGraph API's two doors are ``http``)."""
REFUSALS = ("already answered", "no pending interrupt", "not pending", "not waiting for input")
"""What a refusal says (one of): the interrupt was answered already, or nothing is pending."""


@dataclass
class Pending:
    """A task started over A2A, stopped at its approval request."""

    task: Task
    interrupt_id: str

    @property
    def thread_id(self) -> str:
        return str(self.task.context_id)


@dataclass
class Outcome:
    door: str
    answered: bool
    said: str = ""
    """A refusal's message (a success: empty)."""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Doors:
    """The five ways to answer, for one caller (``headers``) of one server."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)

    async def answer(self, door: str, p: Pending, answer: Any = APPROVE) -> Outcome:
        """Answer ``p``'s interrupt through ``door``: answered, or refused with that door's
        own error (anything else — a 5xx, an unexpected exception — fails the test)."""
        doors: dict[str, Callable[[Pending, Any], Awaitable[Outcome]]] = {
            "a2a": self.a2a,
            "approvals": self.approvals,
            "sdk": self.sdk,
            "ag-ui": self.ag_ui,
            "mcp": self.mcp,
        }
        return await doors[door](p, answer)

    async def a2a(self, p: Pending, answer: Any) -> Outcome:
        """The next message of the task: a DataPart ``{"decisions": [...]}``."""
        async with a2a(self.url, headers=self.headers, streaming=False) as client:
            message = data_message(answer, task_id=p.task.id, context_id=p.thread_id)
            try:
                [reply] = [e async for e in client.send_message(message)]
            except A2AError as err:
                return Outcome("a2a", False, str(err), {"error": type(err).__name__})
        return Outcome("a2a", True, details={"state": reply.task.status.state})

    async def approvals(self, p: Pending, answer: Any) -> Outcome:
        async with httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=60) as http:
            res = await http.post(
                f"/threads/{p.thread_id}/approvals",
                json={"interrupt_id": p.interrupt_id, **answer},
            )
        if res.status_code == 200:
            return Outcome("approvals", True, details={"run_id": res.json()["run_id"]})
        assert res.status_code in (404, 409), res.text
        return Outcome("approvals", False, res.json()["detail"], {"status": res.status_code})

    async def sdk(self, p: Pending, answer: Any) -> Outcome:
        key = self.headers.get("x-api-key")
        async with get_client(url=self.url, api_key=key) as client:
            try:
                run = await client.runs.create(
                    p.thread_id, "agent", command={"resume": {p.interrupt_id: answer}}
                )
            except APIStatusError as err:
                assert err.status_code in (404, 409), (err.status_code, err.body)
                detail = err.body["detail"] if isinstance(err.body, dict) else str(err.body)
                return Outcome("sdk", False, detail, {"status": err.status_code})
        return Outcome("sdk", True, details={"run_id": run["run_id"]})

    async def ag_ui(self, p: Pending, answer: Any) -> Outcome:
        """A RunAgentInput whose ``resume`` answers the interrupt; success is its stream."""
        body = {
            "threadId": p.thread_id,
            "runId": str(uuid.uuid4()),
            "messages": [],
            "resume": [{"interruptId": p.interrupt_id, "status": "resolved", "payload": answer}],
        }
        async with (
            httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=60) as http,
            http.stream("POST", "/ag-ui/agent", json=body) as res,
        ):
            if res.status_code != 200:
                assert res.status_code in (404, 409), (await res.aread()).decode()
                detail = json.loads(await res.aread())["detail"]
                return Outcome("ag-ui", False, detail, {"status": res.status_code})
            events = [
                json.loads(line[5:]) async for line in res.aiter_lines() if line.startswith("data:")
            ]
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        return Outcome("ag-ui", True, details={"outcome": events[-1]["outcome"]})

    async def mcp(self, p: Pending, answer: Any) -> Outcome:
        """The ``agent`` tool of ``/mcp``, with the thread and ``command``."""
        call = {"thread_id": p.thread_id, "command": {"resume": {p.interrupt_id: answer}}}
        async with mcp_session(f"{self.url}/mcp", headers=self.headers) as session:
            result = await session.call_tool("agent", call)
        if result.is_error:
            return Outcome("mcp", False, text(result))
        return Outcome("mcp", True, details={"out": result.structured_content})


async def start(
    url: str, headers: dict[str, str] | None = None, push_to: str | None = None
) -> Pending:
    """``greet()`` started over A2A: the task, input-required, and its one interrupt's id
    (``push_to``: with a push notification config of that URL)."""
    request = data_message(greet())
    if push_to is not None:
        config = TaskPushNotificationConfig(url=push_to, token="tok")
        request.configuration.CopyFrom(
            SendMessageConfiguration(task_push_notification_config=config)
        )
    async with a2a(url, headers=headers, streaming=False) as client:
        [reply] = [e async for e in client.send_message(request)]
    task = reply.task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
    asked = [p["data"] for p in MessageToDict(task.status.message)["parts"] if "data" in p]
    [request] = asked
    assert request["value"]["action_requests"][0]["name"] == "write_file"
    return Pending(task, request["interrupt_id"])


async def get_task(url: str, p: Pending, headers: dict[str, str] | None = None) -> Task:
    async with a2a(url, headers=headers, streaming=False) as client:
        task: Task = await client.get_task(GetTaskRequest(id=p.task.id))
        return task


async def settled(http: httpx.AsyncClient, thread_id: str, **kw: Any) -> list[dict[str, Any]]:
    """The thread's runs, once every one of them ended (joined)."""
    runs: list[dict[str, Any]] = (await http.get(f"/threads/{thread_id}/runs", **kw)).json()
    for run in runs:
        joined = await http.get(f"/threads/{thread_id}/runs/{run['run_id']}/join", **kw)
        assert joined.status_code == 200, joined.text
    return list((await http.get(f"/threads/{thread_id}/runs", **kw)).json())


def refused(outcome: Outcome, p: Pending) -> None:
    """A refusal that says why, in the door's own terms."""
    assert not outcome.answered, outcome
    said = outcome.said
    assert any(word in said for word in REFUSALS), outcome
    if outcome.door in ("approvals", "sdk", "ag-ui"):
        assert outcome.details["status"] == 409, outcome
    if outcome.door in ("approvals", "sdk", "ag-ui", "mcp"):
        assert p.interrupt_id in said, outcome  # names the interrupt it refused
    if outcome.door == "a2a":
        assert outcome.details["error"] == "InvalidParamsError", outcome
        assert p.task.id in said or p.interrupt_id in said, outcome


async def check_once(
    http: httpx.AsyncClient,
    url: str,
    p: Pending,
    via: str,
    actor: str,
    headers: dict[str, str] | None = None,
) -> None:
    """The task ended completed, greeting.txt holds the greeting, one decision (``via``,
    ``actor``) and one write in the audit log."""
    kw: dict[str, Any] = {"headers": headers} if headers else {}
    runs = await settled(http, p.thread_id, **kw)
    assert len(runs) == 2, runs  # the task's run and the one that resumed it: nothing else ran
    assert {r["status"] for r in runs} == {"success"}, runs
    task = await get_task(url, p, headers)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    # The task followed the resumed run (whichever door answered): its reply, its position.
    position = MessageToDict(task.metadata)["threadline"]
    assert position["run_id"] == runs[0]["run_id"] != p.task.id.split(":")[1], position
    [artifact] = task.artifacts
    assert "greeting.txt" in artifact.parts[0].text, artifact
    greeting = await http.get(f"/threads/{p.thread_id}/workspace/greeting.txt", **kw)
    assert greeting.text == "Hello, Ada!\n"
    audit = (await http.get(f"/threads/{p.thread_id}/audit", **kw)).json()
    [decision] = [e for e in audit if e["kind"] == "decision"]
    assert decision["detail"] == {"interrupt_id": p.interrupt_id, "answer": APPROVE, "via": via}
    assert decision["actor"] == actor and decision["run_id"] == runs[0]["run_id"]
    [write] = [e for e in audit if e["kind"] == "tool" and e["tool"] == "write_file"]
    assert write["run_id"] == runs[0]["run_id"] and write["detail"]["ok"] is True


@pytest.mark.parametrize("door", DOORS)
async def test_answered_once_through_any_door(
    server: ServerProcess, http: httpx.AsyncClient, door: str
) -> None:
    doors = Doors(server.url)
    p = await start(server.url)
    won = await doors.answer(door, p)
    assert won.answered, won
    others = [d for d in DOORS if d != door]
    # While the resumed run may still be going, every other door refuses the same answer...
    for other in others:
        refused(await doors.answer(other, p), p)
    await check_once(http, server.url, p, VIA[door], "anonymous")
    # ... and after it ended, every door (this one too).
    for other in DOORS:
        refused(await doors.answer(other, p), p)
    await check_once(http, server.url, p, VIA[door], "anonymous")


async def test_five_doors_at_the_same_moment(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    doors = Doors(server.url)
    p = await start(server.url)
    outcomes = await asyncio.gather(*(doors.answer(door, p) for door in DOORS))
    [won] = [o for o in outcomes if o.answered]
    for lost in outcomes:
        if lost is not won:
            refused(lost, p)
    await check_once(http, server.url, p, VIA[won.door], "anonymous")


async def test_the_task_takes_only_its_own_answers(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    """Answered through the approvals API, the task's push notification says completed; a run
    started later on its thread (over the LangGraph API, with its own approval) is no part of
    it: GetTask, ListTasks and the push outbox stay with the task's two runs."""
    with receiving() as rx:
        p = await start(server.url, push_to=rx.url("/task"))
        await eventually(pushed(rx, "/task", p.task.id, "TASK_STATE_INPUT_REQUIRED"), 30)
        assert (await Doors(server.url).answer("approvals", p)).answered
        [told] = await eventually(pushed(rx, "/task", p.task.id, "TASK_STATE_COMPLETED"), 30)
        assert "greeting.txt" in told.body["artifacts"][0]["parts"][0]["text"]
        resumed = (await settled(http, p.thread_id))[0]["run_id"]

        later = await http.post(
            f"/threads/{p.thread_id}/runs/wait",
            json={"assistant_id": "agent", "input": greet("Bo")},
        )
        [asked] = later.json()["__interrupt__"]
        answer = {"interrupt_id": asked["id"], **APPROVE}
        approved = await http.post(f"/threads/{p.thread_id}/approvals", json=answer)
        assert approved.status_code == 200, approved.text
        assert len(await settled(http, p.thread_id)) == 4
        task = await get_task(server.url, p)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert MessageToDict(task.metadata)["threadline"]["run_id"] == resumed
        async with a2a(server.url, streaming=False) as client:
            listed = await client.list_tasks(ListTasksRequest(context_id=p.thread_id))
        assert [(t.id, t.status.state) for t in listed.tasks] == [
            (p.task.id, TaskState.TASK_STATE_COMPLETED)
        ]
        await asyncio.sleep(1.5)  # the delivery loop's passes (every 0.2 s) add nothing more
        rows = await outbox(server.env["DATABASE_URL"], p.task.id)
        assert [(r["state"], str(r["run_id"])) for r in rows] == [
            ("input-required", p.task.id.split(":")[1]),
            ("completed", resumed),
        ]


async def test_another_tenant_answers_through_no_door(
    keys_server: ServerProcess, tmp_path: Path
) -> None:
    database = keys_server.env["DATABASE_URL"]
    alice = {"x-api-key": create_key(tmp_path, database, "alice")}
    bob = {"x-api-key": create_key(tmp_path, database, "bob")}
    p = await start(keys_server.url, alice)
    for door in DOORS:
        out = await Doors(keys_server.url, bob).answer(door, p)
        assert not out.answered, out
        if door == "a2a":
            assert out.details["error"] == "TaskNotFoundError" and "No task" in out.said, out
        elif door == "mcp":
            assert "No thread" in out.said, out
        else:
            assert out.details["status"] == 404 and "No thread" in out.said, out
    async with httpx.AsyncClient(base_url=keys_server.url, timeout=60) as http:
        # Nothing recorded, nothing run: still waiting for alice.
        audit = (await http.get(f"/threads/{p.thread_id}/audit", headers=alice)).json()
        assert audit == []
        state = (await http.get(f"/threads/{p.thread_id}/state", headers=alice)).json()
        assert [i["id"] for i in state["interrupts"]] == [p.interrupt_id]
        assert len((await http.get(f"/threads/{p.thread_id}/runs", headers=alice)).json()) == 1
        task = await get_task(keys_server.url, p, alice)
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        won = await Doors(keys_server.url, alice).answer("ag-ui", p)
        assert won.answered and won.details["outcome"] == {"type": "success"}, won
        await check_once(http, keys_server.url, p, "ag-ui", "alice", alice)
