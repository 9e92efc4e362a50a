"""Approvals: answer a pending approval interrupt; the audit log of tools and decisions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from api.contract.approvals import ApprovalBody
from api.contract.runs import AuditEntry, CommandBody, Run, RunCreate
from api.http.checked_route import CheckedRoute, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.platform.errors import Conflict
from api.platform.validation import MAX_OFFSET
from api.store import audit as audit_log

router = APIRouter(tags=["approvals"], route_class=CheckedRoute)


@router.post(
    "/threads/{thread_id}/approvals",
    response_model=Run,
    responses=responses(403, 404, 409, 413, 422),
)
async def decide(
    thread_id: ThreadId,
    body: ApprovalBody,
    svc: ServiceDep,
) -> Any:
    """Answer one approval request with ``{"decisions": [...]}`` (LangChain's human-in-the-loop
    answer, the resume value of that interrupt); starts (and returns) the run that resumes the
    thread."""
    answer: dict[str, Any] = {"decisions": body.decisions}
    # Resumed with the assistant of the thread's latest run (its config and context again).
    assistant = await svc.latest_assistant(thread_id)
    # The id is explicit here: one that is not pending is a 409 naming those that are (as a
    # resume map gets), never taken for the answer to whichever interrupt is pending.
    pending = [i.id for i in (await svc.state(thread_id)).interrupts]
    if pending and body.interrupt_id not in pending:
        raise Conflict(
            f"Interrupt {body.interrupt_id!r} is not pending on this thread (already answered "
            f"or unknown). Pending interrupt ids: {pending}."
        )
    run = RunCreate(
        assistant_id=assistant,
        command=CommandBody(resume={body.interrupt_id: answer}),
        stream_mode=body.stream_mode,
    )
    return await svc.create_run(thread_id, run)


@router.get(
    "/threads/{thread_id}/audit",
    responses={200: {"model": list[AuditEntry]}, **responses(404, 422)},
)
async def audit(
    thread_id: ThreadId,
    svc: ServiceDep,
    limit: int = Query(500, ge=1, le=5000),
    after_id: int = Query(0, ge=0, le=MAX_OFFSET),
) -> Any:
    """Every tool execution and every decision on the thread, oldest first."""
    await svc.thread(thread_id, values=False)
    async with svc.pool.connection() as conn:
        return await audit_log.entries(conn, thread_id, after_id=after_id, limit=limit)
