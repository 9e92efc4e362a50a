"""A run request's checks against its thread (``api.runs.run_create``): the caller may see the
thread, the graph takes the input, a resume answers what is pending. They run either before the
run's transaction, on a read of the thread of their own, or in it, on the row its lock read,
when nothing in them waits for another pooled connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from api.auth.context import caller
from api.contract.runs import RunCreate
from api.engine.run_context import check_context, effective_config
from api.platform.errors import Invalid, NotFound
from api.project.adapters import RunRequest, check_private_config
from api.runs.assistant_config import RunAssistant, merged
from api.runs.core import Core
from api.runs.run_options import breakpoints, start_checkpoint
from api.store import threads


class ReadFirst(Exception):
    """The run's checks need to read more than its thread's row (its pending interrupts): read
    the thread and check the run before the transaction, then queue again."""


@dataclass
class Checked:
    """A run request, checked against its thread as found (``thread``, None: none yet)."""

    thread: dict[str, Any] | None
    kwargs: dict[str, Any]
    superseded: dict[str, Any]
    """Pending interrupts the new input closes: interrupt id -> the answer recorded."""
    answers: dict[str, Any]
    """A resume's answers: interrupt id -> answer."""


def reads_first(body: RunCreate) -> bool:
    """Whether a run is checked before its transaction, on a read of its thread of its own: a
    resume, a run from a checkpoint, and one that cancels what is active read more than the
    thread's row. Any other run reads the row in its transaction's first round trip, under the
    thread's lock, and is checked there."""
    return (
        body.command is not None
        or body.checkpoint is not None
        or body.multitask_strategy in ("interrupt", "rollback")
    )


async def check_request(
    svc: Core,
    thread_id: str,
    body: RunCreate,
    found: dict[str, Any] | None,
    *,
    assistant: RunAssistant,
    threadless: bool,
    in_transaction: bool = False,
) -> Checked:
    """The run's kwargs and the checks that refuse a run (4xx), against its thread as found.
    Its config and context are the assistant's with the run's merged over them
    (``api.runs.assistant_config.merged``), and every check reads them merged: what an assistant
    holds is checked as if the run had sent it. ``in_transaction``: the thread's lock is
    held, so nothing here may wait for another pooled connection (its pending interrupts, say):
    :class:`ReadFirst` instead."""
    exists = found is not None
    check_context(body.context, body.config)
    config, context = merged(assistant, body.config, body.context)
    graph_id = assistant.graph_id
    kwargs: dict[str, Any] = {
        "input": body.input,
        "command": body.command.model_dump(exclude_none=True) if body.command else None,
        "config": config,
        "stream_mode": body.modes(),
        "on_disconnect": body.on_disconnect,
    }
    if threadless:
        kwargs["on_completion"] = body.on_completion  # api.engine.ephemeral removes the thread
    for key in ("interrupt_before", "interrupt_after"):
        if (nodes := breakpoints(svc, graph_id, body, key)) is not None:
            kwargs[key] = nodes
    if start := await start_checkpoint(svc, thread_id, body, exists):
        kwargs["checkpoint"] = start
    if context is not None:
        kwargs["context"] = context
    if body.stream_subgraphs:
        kwargs["stream_subgraphs"] = True
    if body.webhook:
        kwargs["webhook"] = body.webhook  # called at the run's end (api.store.webhooks)
    seen = effective_config(config, context)  # what the graph will see
    with_caller(svc, kwargs, seen, "run")
    adapter = svc.runtime.adapter(graph_id)
    request = _run_request(svc, thread_id, graph_id, body, kwargs, found, in_transaction, seen)
    superseded = await adapter.check_run(request)
    answers: dict[str, Any] = {}
    if body.command and body.command.resume is not None:
        answers = await svc.check_resume(thread_id, graph_id, body.command.resume)
    return Checked(found, kwargs, superseded, answers)


def with_caller(svc: Core, kwargs: dict[str, Any], config: Any, what: str) -> None:
    """Name the caller in a run's (or a schedule's) ``kwargs`` (``langgraph_auth_user``), then
    refuse (422) kwargs that are not JSON or a config with a private key."""
    if svc.access.enabled:
        kwargs["auth_user"] = caller().as_dict()
    try:
        orjson.dumps(kwargs)
    except TypeError as err:
        raise Invalid(f"the {what}'s input must be JSON: {err}") from None
    check_private_config(config)


async def visible_for_run(svc: Core, thread_id: str, body: RunCreate) -> dict[str, Any] | None:
    """The thread (one read), None when there is none; 404 when it is not the caller's."""
    async with svc.pool.connection() as conn:
        found = await threads.get(conn, thread_id, values="scalars")
    if found is not None:
        await check_visible(svc, thread_id, body, found)
    return found


async def check_visible(svc: Core, thread_id: str, body: RunCreate, found: dict[str, Any]) -> None:
    """404 when the thread is not the caller's to run (a resume is an answer to its approvals:
    reviewers may, and an approve permission binds)."""
    if body.command and body.command.resume is not None:
        if not (await svc.scope("read", {"thread_id": thread_id})).allows(found):
            raise NotFound(f"No thread {thread_id!r}. Create it with POST /threads first.")
        scope = await svc.access.approval_scope(caller(), {"thread_id": thread_id})
        if not scope.allows(found):
            raise NotFound(f"No thread {thread_id!r}.")
    elif not (await svc.scope("create_run", {"thread_id": thread_id})).allows(found):
        raise NotFound(f"No thread {thread_id!r}. Create it with POST /threads first.")


def _run_request(
    svc: Core,
    thread_id: str,
    graph_id: str,
    body: RunCreate,
    kwargs: dict[str, Any],
    found: dict[str, Any] | None,
    in_transaction: bool,
    config: dict[str, Any],
) -> RunRequest:
    async def pending() -> Any:
        if in_transaction:
            raise ReadFirst
        state = await svc.graph(graph_id).aget_state(svc.thread_config(thread_id))
        return state.interrupts

    return RunRequest(
        thread_id=thread_id,
        input=body.input,
        command=kwargs["command"],
        config=config,
        thread=found,
        pending=pending,
    )
