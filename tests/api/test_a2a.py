"""A2A at ``/a2a/{assistant_id}`` against a real server, through the official ``a2a-sdk`` client
(JSON-RPC, streaming on): the agent card, SendMessage, the stream, GetTask, ListTasks,
CancelTask, an approval (input-required) answered exactly once by the next message (audited as
``a2a``), SubscribeToTask from a position, tenants (THREADLINE_AUTH=keys), and hostile input as
plain JSON-RPC posts."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from tests.utils.keys import create_key
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet

V1 = {"A2A-Version": "1.0"}


@asynccontextmanager
async def a2a(
    base_url: str,
    assistant: str = "agent",
    headers: dict[str, str] | None = None,
    *,
    streaming: bool = True,
) -> AsyncIterator[Any]:
    """The official client of ``assistant``, from its agent card."""
    async with httpx.AsyncClient(timeout=60, headers=headers or {}) as http:
        got = await http.get(
            f"{base_url}/.well-known/agent-card.json", params={"assistant_id": assistant}
        )
        assert got.status_code == 200, got.text
        card = parse_agent_card(got.json())
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)
        yield client


def text_message(text: str, **ids: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)], **ids
        )
    )


def data_message(data: Any, *, blocking: bool = True, **ids: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=[Part(data=ParseDict(data, Value()))],
            **ids,
        ),
        configuration=SendMessageConfiguration(return_immediately=not blocking),
    )


async def send(client: Any, request: SendMessageRequest) -> Task:
    """SendMessage through the streaming client: the last Task the stream says, as a Task."""
    events = [e async for e in client.send_message(request)]
    task_id = next(e.task.id for e in events if e.HasField("task"))
    return await client.get_task(GetTaskRequest(id=task_id))


def kinds(events: list[StreamResponse]) -> list[str]:
    return [str(e.WhichOneof("payload")) for e in events]


def seq_of(event: StreamResponse) -> tuple[str, int]:
    inner = getattr(event, str(event.WhichOneof("payload")))
    meta = MessageToDict(inner.metadata)["threadline"]
    return meta["run_id"], int(meta["seq"])


def last_event_id(event: StreamResponse) -> str:
    """The ``Last-Event-ID`` that resumes right after ``event``: ``<run>:<seq>[.<part>]``."""
    inner = getattr(event, str(event.WhichOneof("payload")))
    meta = MessageToDict(inner.metadata)["threadline"]
    part = f".{int(meta['part'])}" if "part" in meta else ""
    assert meta["event_id"] == f"{meta['run_id']}:{int(meta['seq'])}{part}", meta
    return str(meta["event_id"])


async def rpc(
    http: httpx.AsyncClient,
    method: str,
    params: Any,
    *,
    assistant: str = "agent",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A plain JSON-RPC call (v1.0 names with ``A2A-Version: 1.0``, v0.3 names without)."""
    version = V1 if "/" not in method else {}
    res = await http.post(
        f"/a2a/{assistant}",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={**version, **(headers or {})},
    )
    assert res.status_code == 200, res.text
    out: dict[str, Any] = res.json()
    return out


def error_of(reply: dict[str, Any]) -> tuple[int, str]:
    assert "error" in reply, reply
    return reply["error"]["code"], reply["error"]["message"]


async def test_agent_card(http: httpx.AsyncClient, server: ServerProcess) -> None:
    card = (await http.get("/.well-known/agent-card.json", params={"assistant_id": "agent"})).json()
    assert card["supportedInterfaces"][0]["url"] == f"{server.url}/a2a/agent"
    assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["pushNotifications"] is True
    assert card["skills"][0]["id"] == "agent-main"
    same = (await http.get("/a2a/agent/.well-known/agent-card.json")).json()
    assert same == card == (await http.get("/a2a/agent")).json()
    unknown = await http.get("/.well-known/agent-card.json", params={"assistant_id": "nope"})
    assert unknown.status_code == 404 and "No assistant" in unknown.json()["detail"]
    missing = await http.get("/.well-known/agent-card.json")
    assert missing.status_code == 400 and "assistant_id" in missing.json()["detail"]


async def test_send_get_list(server: ServerProcess) -> None:
    async with a2a(server.url, streaming=False) as client:
        sent = text_message("hello there")
        [reply] = [e async for e in client.send_message(sent)]
        task = reply.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        thread_id, _, run_id = task.id.rpartition(":")
        assert thread_id == task.context_id and uuid.UUID(run_id)
        assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]
        assert task.history[0].parts[0].text == "hello there"
        assert task.history[0].message_id == sent.message.message_id  # the client's id, kept
        [artifact] = task.artifacts
        assert artifact.parts[0].text == task.history[1].parts[0].text != ""
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED and got.history == task.history
        short = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
        assert list(short.history) == [task.history[1]]
        # A second task in the same context: a new run on the thread, a new task id.
        [again] = [
            e async for e in client.send_message(text_message("again", context_id=task.context_id))
        ]
        assert again.task.context_id == task.context_id and again.task.id != task.id
        assert len(again.task.history) == 4  # the context's history
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [again.task.id, task.id]
        assert listed.total_size == 2
        page = await client.list_tasks(ListTasksRequest(context_id=task.context_id, page_size=1))
        assert [t.id for t in page.tasks] == [again.task.id] and page.next_page_token == "1"
        rest = await client.list_tasks(
            ListTasksRequest(context_id=task.context_id, page_size=1, page_token="1")
        )
        assert [t.id for t in rest.tasks] == [task.id] and rest.next_page_token == ""
        done = await client.list_tasks(
            ListTasksRequest(status=TaskState.TASK_STATE_WORKING, context_id=task.context_id)
        )
        assert list(done.tasks) == []


async def test_stream_and_subscribe_from_a_position(server: ServerProcess) -> None:
    async with a2a(server.url) as client:
        events = [e async for e in client.send_message(data_message(counter(3)))]
        assert kinds(events)[:2] == ["task", "status_update"]
        assert kinds(events)[-1] == "status_update"
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        artifacts = [
            e.artifact_update.artifact.parts[0].text
            for e in events[1:-1]
            if e.HasField("artifact_update")
        ]
        assert artifacts[0].startswith("Appending line 1") and "1 to 3" in artifacts[-1]
        task_id = events[0].task.id
        positions = [seq_of(e) for e in events]
        run_id = positions[0][0]
        assert positions[0] == (run_id, 0)
        seqs = [p[1] for p in positions[1:]]
        assert seqs == sorted(seqs) and seqs[0] >= 1
        # Resubscribing after any event: the Task, then exactly what came after it.
        for i, seen in enumerate(events[1:], start=1):
            context = ClientCallContext(service_parameters={"Last-Event-ID": last_event_id(seen)})
            tail = [
                e
                async for e in client.subscribe(SubscribeToTaskRequest(id=task_id), context=context)
            ]
            assert tail[0].HasField("task") and seq_of(tail[0]) == seq_of(seen)
            assert [MessageToDict(e) for e in tail[1:]] == [
                MessageToDict(e) for e in events[i + 1 :]
            ], i
        # From the start (seq 0): the whole stream again, byte for byte.
        context = ClientCallContext(service_parameters={"Last-Event-ID": f"{run_id}:0"})
        replay = [
            e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id), context=context)
        ]
        assert [MessageToDict(e) for e in replay[1:]] == [MessageToDict(e) for e in events[1:]]


async def test_cancel(server: ServerProcess, http: httpx.AsyncClient) -> None:
    async with a2a(server.url, streaming=False) as client:
        [reply] = [
            e async for e in client.send_message(data_message(counter(30, 0.5), blocking=False))
        ]
        task_id = reply.task.id
        assert reply.task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    again = await rpc(http, "CancelTask", {"id": task_id})
    code, message = error_of(again)
    assert code == -32002 and "canceled" in message
    v03 = await rpc(http, "tasks/get", {"id": task_id})
    assert v03["result"]["status"]["state"] == "canceled" and v03["result"]["kind"] == "task"


async def test_approval_answered_once(server: ServerProcess, http: httpx.AsyncClient) -> None:
    async with a2a(server.url, streaming=False) as client:
        [reply] = [e async for e in client.send_message(data_message(greet()))]
        task = reply.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
        request = MessageToDict(task.status.message)
        asked = [p["data"] for p in request["parts"] if "data" in p]
        assert len(asked) == 1 and asked[0]["value"]["action_requests"][0]["name"] == "write_file"
        interrupt_id = asked[0]["interrupt_id"]
        assert [a.name for a in task.artifacts] == ["Interrupt"]
        answer = {"interrupt_id": interrupt_id, "decisions": [{"type": "approve"}]}
        [done] = [
            e
            async for e in client.send_message(
                data_message(answer, task_id=task.id, context_id=task.context_id)
            )
        ]
        assert done.task.id == task.id
        assert done.task.status.state == TaskState.TASK_STATE_COMPLETED, done.task
    # The same answer again (and a text one): refused, nothing started.
    twice = await rpc(
        http,
        "SendMessage",
        {
            "message": {
                "messageId": "m2",
                "role": "ROLE_USER",
                "taskId": task.id,
                "parts": [{"data": answer}],
            }
        },
    )
    code, message = error_of(twice)
    assert code == -32602 and "already answered" in message
    audit = (await http.get(f"/threads/{task.context_id}/audit")).json()
    decisions = [e for e in audit if e["kind"] == "decision"]
    assert len(decisions) == 1 and decisions[0]["detail"]["via"] == "a2a", decisions
    runs = (await http.get(f"/threads/{task.context_id}/runs")).json()
    assert len(runs) == 2 and runs[0]["metadata"]["a2a"] == {"task_id": task.id}


async def test_approval_by_text_over_v03(http: httpx.AsyncClient) -> None:
    started = await rpc(
        http,
        "message/send",
        {
            "message": {
                "kind": "message",
                "messageId": "s1",
                "role": "user",
                "parts": [{"kind": "data", "data": greet()}],
            }
        },
    )
    task = started["result"]
    assert task["status"]["state"] == "input-required", task
    answered = await rpc(
        http,
        "message/send",
        {
            "message": {
                "kind": "message",
                "messageId": "s2",
                "role": "user",
                "taskId": task["id"],
                "contextId": task["contextId"],
                "parts": [{"kind": "text", "text": "reject: not today"}],
            }
        },
    )
    assert answered["result"]["status"]["state"] == "completed", answered
    audit = (await http.get(f"/threads/{task['contextId']}/audit")).json()
    [decision] = [e for e in audit if e["kind"] == "decision"]
    assert decision["detail"]["via"] == "a2a"
    assert "not today" in str(decision["detail"])


async def test_hostile_input(http: httpx.AsyncClient) -> None:
    bad_json = await http.post("/a2a/agent", content=b"{nope", headers=V1)
    assert bad_json.json()["error"]["code"] == -32700
    unknown = await rpc(http, "NoSuchMethod", {})
    assert error_of(unknown)[0] == -32601
    wrong_type = await rpc(http, "SendMessage", {"message": "hello"})
    assert error_of(wrong_type)[0] == -32602
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    nobody = await rpc(http, "SendMessage", {"message": message}, assistant="nope")
    code, text = error_of(nobody)
    assert code == -32602 and "No assistant 'nope'" in text
    for task_id in ("garbage", "x:y", f"{uuid.uuid4()}:{uuid.uuid4()}"):
        code, text = error_of(await rpc(http, "GetTask", {"id": task_id}))
        assert code == -32001 and "ListTasks" in text
    file_part = {**message, "parts": [{"url": "https://example.com/a.png"}]}
    code, text = error_of(await rpc(http, "SendMessage", {"message": file_part}))
    assert code == -32005 and "text parts" in text
    both = {**message, "parts": [{"text": "x"}, {"data": greet()}]}
    assert error_of(await rpc(http, "SendMessage", {"message": both}))[0] == -32602
    odd_data = {**message, "parts": [{"data": {"x": 1}}]}
    code, text = error_of(await rpc(http, "SendMessage", {"message": odd_data}))
    assert code == -32602 and '"messages"' in text
    bad_thread = {**message, "contextId": "not a valid id!"}
    code, text = error_of(await rpc(http, "SendMessage", {"message": bad_thread}))
    assert code == -32602, text
    assert error_of(await rpc(http, "ListTasks", {"pageSize": 1000}))[0] == -32602
    assert error_of(await rpc(http, "ListTasks", {"pageToken": "x"}))[0] == -32602
    # A task of another assistant of the same graph: told where it belongs.
    other = (await http.post("/assistants", json={"graph_id": "agent", "name": "other"})).json()
    made = await rpc(http, "SendMessage", {"message": message})
    task_id = made["result"]["task"]["id"]
    code, text = error_of(
        await rpc(http, "GetTask", {"id": task_id}, assistant=other["assistant_id"])
    )
    assert code == -32602 and "another assistant" in text
    res = await http.post(
        "/a2a/agent",
        json={"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}},
        headers={**V1, "Last-Event-ID": "soon"},
    )
    assert res.json()["error"]["code"] == -32602, res.text


async def test_tenants(keys_server: ServerProcess, tmp_path: Path) -> None:
    alice = {"x-api-key": create_key(tmp_path, keys_server.env["DATABASE_URL"], "alice")}
    bob = {"x-api-key": create_key(tmp_path, keys_server.env["DATABASE_URL"], "bob")}
    async with a2a(keys_server.url, headers=alice) as client:
        events = [e async for e in client.send_message(data_message(greet()))]
        task = events[0].task
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        mine = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in mine.tasks] == [task.id]
    async with httpx.AsyncClient(base_url=keys_server.url, timeout=60) as http:
        assert (await http.post("/a2a/agent", json={})).status_code == 401
        assert (await http.get("/a2a/agent")).status_code == 401
        for method, params in (
            ("GetTask", {"id": task.id}),
            ("CancelTask", {"id": task.id}),
            ("tasks/get", {"id": task.id}),
            ("ListTaskPushNotificationConfigs", {"taskId": task.id}),
            (
                "SendMessage",
                {
                    "message": {
                        "messageId": "b",
                        "role": "ROLE_USER",
                        "taskId": task.id,
                        "parts": [{"data": {"decisions": [{"type": "approve"}]}}],
                    }
                },
            ),
        ):
            code, _ = error_of(await rpc(http, method, params, headers=bob))
            assert code == -32001, (method, code)
        res = await http.post(
            "/a2a/agent",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SubscribeToTask",
                "params": {"id": task.id},
            },
            headers={**V1, **bob},
        )
        assert res.json()["error"]["code"] == -32001, res.text
        theirs = await rpc(http, "ListTasks", {}, headers=bob)
        assert theirs["result"]["tasks"] == [] and theirs["result"]["totalSize"] == 0
        # Bob's message naming alice's context: her thread is not his to use.
        taken = await rpc(
            http,
            "SendMessage",
            {
                "message": {
                    "messageId": "c",
                    "role": "ROLE_USER",
                    "contextId": task.context_id,
                    "parts": [{"text": "hi"}],
                }
            },
            headers=bob,
        )
        assert "error" in taken and taken["error"]["code"] != -32603, taken
        state = (await http.get(f"/threads/{task.context_id}/state", headers=alice)).json()
        assert state["interrupts"], state  # still waiting: bob touched nothing
