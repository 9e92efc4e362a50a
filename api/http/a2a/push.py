"""Push notification configs of A2A tasks (``tasks/pushNotificationConfig/*``), kept in
PostgreSQL (``api.store.a2a_push``) and delivered by ``api.engine.a2a_push``; and :func:`renderer`,
the Task a notification carries.

A config's URL is checked when it is created with the run webhooks' address rules
(``api.contract.webhook_url.check``: refused with a message that says why), and again at every
delivery by the sending transport. A server that refuses webhooks (``"http": {"disable_webhooks":
true}``) refuses push configs too.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types.a2a_pb2 import AuthenticationInfo, TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError, PushNotificationNotSupportedError
from google.protobuf.json_format import MessageToDict

from api.contract import webhook_url
from api.http.a2a import tasks
from api.http.a2a.tasks import TaskRef
from api.runs.service import Service
from api.store import a2a_push, a2a_tasks

MAX_TOKEN = 1000
MAX_ID = 200


def as_config(row: dict[str, Any]) -> TaskPushNotificationConfig:
    auth = row.get("authentication")
    return TaskPushNotificationConfig(
        task_id=row["task_id"],
        id=row["config_id"],
        url=row["url"],
        token=row.get("token") or "",
        authentication=AuthenticationInfo(**auth) if auth else None,
    )


async def checked(svc: Service, config: TaskPushNotificationConfig) -> dict[str, Any]:
    """The config's fields, once its URL passed the address rules."""
    if not svc.webhooks:
        raise PushNotificationNotSupportedError(
            'This server refuses webhooks (its langgraph.json "http": {"disable_webhooks": '
            "true}), so push notifications too: follow the task with SubscribeToTask or GetTask."
        )
    if not config.url:
        raise InvalidParamsError("The push notification config needs a url.")
    if len(config.token) > MAX_TOKEN or len(config.id) > MAX_ID:
        raise InvalidParamsError(
            f"A push config's token is at most {MAX_TOKEN} characters, its id {MAX_ID}."
        )
    await webhook_url.check(svc.runtime.settings, config.url, enabled=svc.webhooks)
    auth = MessageToDict(config.authentication) if config.HasField("authentication") else None
    return {
        "config_id": config.id or uuid.uuid4().hex,
        "url": config.url,
        "token": config.token or None,
        "authentication": auth or None,
    }


async def save(
    svc: Service, ref: TaskRef, fields: dict[str, Any], since: Any = None
) -> TaskPushNotificationConfig:
    async with svc.pool.connection() as conn:
        row = await a2a_push.save_config(
            conn,
            task_id=ref.task_id,
            thread_id=ref.thread_id,
            first_run_id=ref.runs[0]["run_id"],
            since=since,
            **fields,
        )
    return as_config(row)


async def one(svc: Service, ref: TaskRef, config_id: str) -> TaskPushNotificationConfig:
    async with svc.pool.connection() as conn:
        found = await a2a_push.configs(conn, ref.task_id, config_id or None)
    if not found:
        raise InvalidParamsError(
            f"Task {ref.task_id!r} has no push notification config {config_id!r}; "
            "ListTaskPushNotificationConfigs shows its configs."
        )
    return as_config(found[0])


def renderer(svc: Service) -> Any:
    """What the delivery loop sends for a notification row: the Task as A2A JSON, in the state
    that run's end left it (None once its thread is gone). No caller check here: the config's
    creator was checked when it was created."""

    async def render(row: dict[str, Any]) -> dict[str, Any] | None:
        async with svc.pool.connection() as conn:
            runs = await a2a_tasks.task_runs(conn, row["thread_id"], str(row["first_run_id"]))
        if not runs:
            return None
        ref = TaskRef(row["task_id"], row["thread_id"], runs)
        task = await tasks.snapshot(svc, ref, state=row["state"])
        out: dict[str, Any] = MessageToDict(task)
        return out

    return render
