"""A2A push notifications against a real server and a real receiver on 127.0.0.1 (allowed here
with ``THREADLINE_WEBHOOK_ALLOW_PRIVATE``): the Task POSTed when a task completes and when it
needs input, with the config's token and authentication; retried after a 500; configs created,
read, listed and deleted through the official client; an address the rules refuse is refused
when the config is created. Also the crash test of the A2A stream: SIGKILL mid-stream, restart,
SubscribeToTask from the last seen position: the rest, nothing twice."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
from a2a.client import ClientCallContext
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from psycopg.rows import dict_row

from tests.api.test_a2a import a2a, data_message, error_of, rpc, seq_of, text_message
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet
from tests.utils.webhook_receiver import Receiver, eventually, receiving

SERVER_ENV = {"THREADLINE_WEBHOOK_ALLOW_PRIVATE": "true", "THREADLINE_WEBHOOK_MAX_ATTEMPTS": "3"}


def pushed(rx: Receiver, path: str, task_id: str, state: str) -> Callable[[], Any]:
    def found() -> Any:
        with rx.lock:
            return [
                p
                for p in rx.posts
                if p.path == path
                and p.body.get("id") == task_id
                and p.body["status"]["state"] == state
            ]

    return found


async def outbox(database_url: str, task_id: str) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cur = await conn.execute(
            "SELECT * FROM a2a_push_notifications WHERE task_id = %s ORDER BY id", (task_id,)
        )
        return list(await cur.fetchall())


async def test_pushed_on_completion_and_input_required(server: ServerProcess) -> None:
    with receiving() as rx:
        async with a2a(server.url, streaming=False) as client:
            request = text_message("hello")
            request.configuration.CopyFrom(
                SendMessageConfiguration(
                    task_push_notification_config=TaskPushNotificationConfig(
                        url=rx.url("/done"), token="tok-1"
                    )
                )
            )
            [reply] = [e async for e in client.send_message(request)]
            task_id = reply.task.id
            [post] = await eventually(pushed(rx, "/done", task_id, "TASK_STATE_COMPLETED"), 30)
            assert post.headers["x-a2a-notification-token"] == "tok-1"
            assert post.body["contextId"] == reply.task.context_id
            assert post.body["artifacts"][0]["parts"][0]["text"]

            # An approval: told when it waits for input, then again when it completed.
            request = data_message(greet())
            request.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(
                    id="mine",
                    url=rx.url("/hitl"),
                    token="tok-2",
                    authentication=AuthenticationInfo(scheme="Bearer", credentials="s3cret"),
                )
            )
            [reply] = [e async for e in client.send_message(request)]
            task = reply.task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            [asked] = await eventually(
                pushed(rx, "/hitl", task.id, "TASK_STATE_INPUT_REQUIRED"), 30
            )
            assert asked.headers["x-a2a-notification-token"] == "tok-2"
            assert asked.headers["authorization"] == "Bearer s3cret"
            [data] = [p["data"] for p in asked.body["status"]["message"]["parts"] if "data" in p]
            answer = {"interrupt_id": data["interrupt_id"], "decisions": [{"type": "approve"}]}
            configs = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert [c.id for c in configs.configs] == ["mine"]
            [done] = [e async for e in client.send_message(data_message(answer, task_id=task.id))]
            assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
            await eventually(pushed(rx, "/hitl", task.id, "TASK_STATE_COMPLETED"), 30)
            rows = await outbox(server.env["DATABASE_URL"], task.id)
            assert [(r["state"], r["status"]) for r in rows] == [
                ("input-required", "delivered"),
                ("completed", "delivered"),
            ]


async def test_retried_after_a_500_and_configs(server: ServerProcess) -> None:
    with receiving() as rx:
        rx.script["/flaky"] = [500]
        async with a2a(server.url, streaming=False) as client:
            [reply] = [
                e async for e in client.send_message(data_message(counter(2), blocking=False))
            ]
            task_id = reply.task.id
            made = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, url=rx.url("/flaky"), token="t")
            )
            assert made.id and made.url == rx.url("/flaky")
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id=made.id)
            )
            assert got == made

            # The first POST got a 500: the same notification again, a second later.
            def twice() -> bool:
                return len(pushed(rx, "/flaky", task_id, "TASK_STATE_COMPLETED")()) == 2

            await eventually(twice, 60)
            [row] = await outbox(server.env["DATABASE_URL"], task_id)
            assert row["attempts"] == 2 and row["status"] == "delivered", row
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=made.id)
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert list(listed.configs) == []
            assert await outbox(server.env["DATABASE_URL"], task_id) == []


async def test_refused_addresses(http: httpx.AsyncClient) -> None:
    made = await rpc(
        http,
        "SendMessage",
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    )
    task_id = made["result"]["task"]["id"]
    for url in (
        "http://169.254.169.254/latest",
        "ftp://example.com/x",
        "not a url",
    ):
        code, message = error_of(
            await rpc(http, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url})
        )
        assert code == -32602 and "refused" in message, (url, message)
    # Nothing stored for a refused config, and a bad one in SendMessage starts no run.
    listed = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert listed["result"].get("configs", []) == []
    refused = await rpc(
        http,
        "SendMessage",
        {
            "message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"taskPushNotificationConfig": {"url": "http://169.254.169.254/x"}},
        },
    )
    assert error_of(refused)[0] == -32602
    missing = await rpc(http, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "none"})
    code, message = error_of(missing)
    assert code == -32602 and "no push notification config" in message


async def test_stream_survives_a_kill(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    server = make_server(database_url, tmp_path / "data", name="a2a-kill").start()
    seen = []
    async with a2a(server.url) as client:
        async for event in client.send_message(data_message(counter(6, 0.8))):
            seen.append(event)
            if sum(e.HasField("artifact_update") for e in seen) == 2:
                break
    task_id = seen[0].task.id
    run_id, last = seq_of(seen[-1])
    server.kill()
    server.start()
    position = ClientCallContext(service_parameters={"Last-Event-ID": f"{run_id}:{last}"})
    async with a2a(server.url) as client:
        rest = [
            e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id), context=position)
        ]
        assert rest[0].HasField("task") and seq_of(rest[0]) == (run_id, last)
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        after = [seq_of(e)[1] for e in rest[1:]]
        assert after and min(after) > last and after == sorted(after)
        # Nothing lost, nothing twice: what came before and after the kill is the whole stream.
        whole = ClientCallContext(service_parameters={"Last-Event-ID": f"{run_id}:0"})
        replay = [
            e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id), context=whole)
        ]
        assert [MessageToDict(e) for e in seen[1:] + rest[1:]] == [
            MessageToDict(e) for e in replay[1:]
        ]
        texts = [
            e.artifact_update.artifact.parts[0].text
            for e in replay
            if e.HasField("artifact_update")
        ]
        assert "1 to 6" in texts[-1]
    assert uuid.UUID(run_id)
