"""Schedules apart from HTTP: checking them, their owner's view, and the kwargs of their runs.

A schedule belongs to whoever created it: another tenant's is not found (404), and the runs it
creates carry its owner as ``auth_user`` (what the graph sees as ``langgraph_auth_user``) and go
on threads its owner owns. A thread-bound schedule needs a thread its creator may run on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from api.auth.context import caller
from api.auth.user import NOBODY
from api.contract import webhook_url
from api.contract.crons import CronCreate, CronPayload, CronSearch, CronUpdate
from api.engine.run_context import check_context, effective_config
from api.platform.errors import Invalid, NotFound
from api.runs import assistant_access, cron_schedule
from api.runs.assistant_access import for_run
from api.runs.assistant_config import RunAssistant, default_assistant_id, merged
from api.runs.core import Core
from api.runs.run_checks import with_caller
from api.store import crons

PAYLOAD_FIELDS = tuple(CronPayload.model_fields)
SCHEDULE_FIELDS = ("schedule", "timezone", "end_time", "enabled")


def owner_filter(svc: Core) -> str | None:
    """Whose schedules the caller sees: its own (None: all, without authentication)."""
    user = caller()
    return user.identity if svc.access.enabled and user is not NOBODY else None


def _not_found(cron_id: str) -> NotFound:
    return NotFound(f"No schedule {cron_id!r}. POST /runs/crons/search lists yours.")


def _nodes(svc: Core, graph_id: str, key: str, nodes: Any) -> Any:
    if nodes is None or nodes == "*":
        return nodes
    known = [n for n in svc.graph(graph_id).nodes if n != "__start__"]
    unknown = sorted(set(nodes) - set(known))
    if unknown:
        raise Invalid(
            f"{key} names {unknown}, which graph {graph_id!r} does not have; use its "
            f'nodes ({", ".join(known)}) or "*"'
        )
    return list(dict.fromkeys(nodes))


def run_kwargs(svc: Core, assistant: RunAssistant, payload: CronPayload) -> dict[str, Any]:
    """The kwargs of each run of the schedule, checked now as a run's would be (with the
    assistant's config and context merged in; each run merges the assistant's as it is then:
    ``api.runs.scheduler``)."""
    check_context(payload.context, payload.config)
    modes = payload.stream_mode or "values"
    kwargs: dict[str, Any] = {
        "input": payload.input,
        "command": None,
        "config": payload.config or {},
        "stream_mode": [modes] if isinstance(modes, str) else list(modes),
        "on_disconnect": "continue",
    }
    for key in ("interrupt_before", "interrupt_after"):
        nodes = _nodes(svc, assistant.graph_id, key, getattr(payload, key))
        if nodes is not None:
            kwargs[key] = nodes
    if payload.context is not None:
        kwargs["context"] = payload.context
    if payload.webhook:
        kwargs["webhook"] = payload.webhook
    if payload.stream_subgraphs:
        kwargs["stream_subgraphs"] = True
    seen = effective_config(*merged(assistant, payload.config, payload.context))
    with_caller(svc, kwargs, seen, "schedule")
    return kwargs


def _payload(body: CronPayload) -> dict[str, Any]:
    return body.model_dump(mode="json", include=set(PAYLOAD_FIELDS), exclude_none=True)


def _first_due(svc: Core, schedule: str, timezone: str | None, end: datetime | None) -> Any:
    first = cron_schedule.check(
        schedule, timezone, svc.runtime.settings.cron_min_interval_seconds, datetime.now(UTC)
    )
    return None if end is not None and first > end else first


async def create(svc: Core, body: CronCreate, thread_id: str | None) -> dict[str, Any]:
    assistant = await assistant_access.load(svc, await for_run(svc, body.assistant_id))
    if thread_id is not None:
        await svc.thread(thread_id, "create_run", values=False)
    value = {**body.model_dump(mode="json", exclude_none=True), "thread_id": thread_id}
    await svc.authorize("crons", "create", value)
    await webhook_url.check(svc.runtime.settings, body.webhook, enabled=svc.webhooks)
    payload = _payload(body)
    kwargs = run_kwargs(svc, assistant, body)
    next_run_at = _first_due(svc, body.schedule, body.timezone, body.end_time)
    user = caller()
    async with svc.pool.connection() as conn:
        return await crons.insert(
            conn,
            assistant_id=assistant.assistant_id,
            thread_id=thread_id,
            schedule=body.schedule,
            timezone=body.timezone,
            payload={**payload, "assistant_id": assistant.assistant_id, "schedule": body.schedule},
            kwargs=kwargs,
            metadata=body.metadata or {},
            multitask_strategy=body.multitask_strategy,
            on_run_completed=body.on_run_completed,
            owner=svc.access.owner_of_new(user),
            user_id=user.identity if user.is_authenticated else None,
            enabled=body.enabled,
            end_time=body.end_time,
            next_run_at=next_run_at if body.enabled else None,
        )


async def update(svc: Core, cron_id: str, body: CronUpdate) -> dict[str, Any]:
    sent = body.model_fields_set
    await svc.authorize("crons", "update", {"cron_id": cron_id, **_payload(body)})
    await webhook_url.check(svc.runtime.settings, body.webhook, enabled=svc.webhooks)
    async with svc.pool.connection() as conn, conn.transaction():
        row = await crons.get(conn, cron_id, owner_filter(svc))
        if row is None:
            raise _not_found(cron_id)
        changes: dict[str, Any] = {}
        if sent & set(PAYLOAD_FIELDS):
            merged = {**row["payload"], **_payload(body)}
            for key in sent & set(PAYLOAD_FIELDS):
                if getattr(body, key) is None:
                    merged.pop(key, None)
            try:
                # The stored payload also names the assistant and schedule, for its readers.
                checked = CronPayload.model_validate(
                    {k: v for k, v in merged.items() if k in PAYLOAD_FIELDS}
                )
            except ValidationError as err:
                problem = err.errors()[0]["msg"]
                raise Invalid(f"the updated schedule is not valid: {problem}") from None
            changes["payload"] = merged
            assistant = await assistant_access.load(svc, await for_run(svc, row["assistant_id"]))
            kwargs = run_kwargs(svc, assistant, checked)
            if "auth_user" in row["kwargs"]:  # the runs act as the schedule's owner
                kwargs["auth_user"] = row["kwargs"]["auth_user"]
            changes["kwargs"] = kwargs
            if "metadata" in sent:
                changes["metadata"] = body.metadata or {}
        for key in SCHEDULE_FIELDS:
            if key in sent and (key == "end_time" or getattr(body, key) is not None):
                changes[key] = getattr(body, key)
        if "on_run_completed" in sent and body.on_run_completed is not None:
            changes["on_run_completed"] = body.on_run_completed
        if "schedule" in changes:
            payload = changes.get("payload", row["payload"])
            changes["payload"] = {**payload, "schedule": body.schedule}
        if sent & set(SCHEDULE_FIELDS):
            state = {**row, **changes}
            due = _first_due(svc, state["schedule"], state["timezone"], state["end_time"])
            changes["next_run_at"] = due if state["enabled"] else None
        if not changes:
            return crons.cron_out(row)
        return await crons.update(conn, cron_id, **changes)


async def delete(svc: Core, cron_id: str) -> None:
    await svc.authorize("crons", "delete", {"cron_id": cron_id})
    async with svc.pool.connection() as conn:
        if not await crons.delete(conn, cron_id, owner_filter(svc)):
            raise _not_found(cron_id)


def _filters(body: Any) -> dict[str, Any]:
    return {
        "assistant_id": body.assistant_id,
        "thread_id": body.thread_id,
        "enabled": getattr(body, "enabled", None),
        "metadata": body.metadata,
    }


def _stored(svc: Core, filters: dict[str, Any]) -> dict[str, Any]:
    """The filters as schedules store them: a graph's name also matches its default
    assistant's id (what a schedule created with the graph's name stores)."""
    named = filters["assistant_id"]
    if named is None:
        return filters
    ids = [named] + ([default_assistant_id(named)] if named in svc.runtime.graphs else [])
    return {**filters, "assistant_id": ids}


async def search(svc: Core, body: CronSearch) -> list[dict[str, Any]]:
    await svc.authorize("crons", "search", _filters(body))
    async with svc.pool.connection() as conn:
        found = await crons.search(
            conn,
            owner_filter(svc),
            _stored(svc, _filters(body)),
            sort_by=body.sort_by,
            sort_order=body.sort_order,
            limit=body.limit,
            offset=body.offset,
        )
    if body.select:
        fields = list(dict.fromkeys(body.select))
        return [{k: c[k] for k in fields} for c in found]
    return [{k: v for k, v in c.items() if k != "now"} for c in found]


async def count(svc: Core, body: Any) -> int:
    await svc.authorize("crons", "search", _filters(body))
    async with svc.pool.connection() as conn:
        return await crons.count(conn, owner_filter(svc), _stored(svc, _filters(body)))
