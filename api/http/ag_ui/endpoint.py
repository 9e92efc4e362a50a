"""The AG-UI routes: ``POST /ag-ui/{assistant_id}`` (run the agent, or continue a run's stream)
and ``GET /ag-ui/{assistant_id}/threads/{thread_id}/runs/{run_id}/stream`` (continue a stream,
for ``EventSource``).

The POST is idempotent by ``runId``: a ``threadId`` and ``runId`` that name a run of the
thread (started over AG-UI with that ``runId``) start nothing; the answer is that run's stream,
after ``Last-Event-ID`` (a header: the ``id`` of the last frame received, or the
``rawEvent.threadline.event_id`` of the last event; none: from the start).
A ``Last-Event-ID`` for a run that does not exist is a 404. A client that lost its stream
(a dropped connection, a crashed replica) sends the same request again with that header, to
any replica. Closing the stream does not cancel the run (``POST
/threads/{thread_id}/runs/{run_id}/cancel`` does; the stream then ends with ``outcome``
``cancelled``).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from ag_ui.core import RunAgentInput
from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse

from api.auth.context import set_door
from api.contract.runs import RunCreate
from api.http.ag_ui import resume_point, run_input
from api.http.ag_ui.stream import ag_ui_run_id, check_after, frames
from api.http.checked_route import AssistantId, CheckedRoute, RunId, ThreadId
from api.http.deps import ServiceDep
from api.http.error_responses import responses
from api.http.sse import sse_response
from api.http.stream_limits import TOO_MANY_STREAMS, Slot, claim_stream
from api.platform.errors import NotFound
from api.runs.service import Service
from api.store import run_lookup

router = APIRouter(tags=["ag-ui"], route_class=CheckedRoute)

EVENT_ID = r"^([0-9]{1,18}(\.[0-9]{1,6})?)?$"
LastEventId = Annotated[
    str | None, Header(alias="Last-Event-ID", json_schema_extra={"pattern": EVENT_ID})
]
"""Continue the stream after this event (the ``id`` of the last frame received, ``<seq>`` or
``<seq>.<part>``)."""
LastEventIdQuery = Annotated[
    str | None, Query(alias="last_event_id", json_schema_extra={"pattern": EVENT_ID})
]
STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: AG-UI 1.0 events, `RUN_STARTED` first and "
        "`RUN_FINISHED` or `RUN_ERROR` last; each frame's `id` is the stored event it comes from.",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    },
    **TOO_MANY_STREAMS,
    **responses(403, 404, 409, 413, 422),
}


@router.post("/ag-ui/{assistant_id}", response_class=EventSourceResponse, responses=STREAM)
async def run_agent(
    assistant_id: AssistantId,
    body: RunAgentInput,
    svc: ServiceDep,
    request: Request,
    last_event_id: LastEventId = None,
) -> EventSourceResponse:
    """Run the assistant on the thread ``threadId`` (created if needed) with the messages it
    does not hold yet, or answer its pending interrupts (``resume``); the answer is the run's
    AG-UI event stream. The same ``threadId`` and ``runId`` again continue that run's stream
    after ``Last-Event-ID`` instead of starting a run."""
    set_door("ag-ui")  # the audit log's decisions say they came through AG-UI
    with _slot(request, svc) as slot:
        run_input.check_ids(body)
        after = resume_point.parse(last_event_id)
        run = await _existing(svc, body.thread_id, body.run_id)
        if run is None:
            if last_event_id is not None:
                raise NotFound(
                    f"No run {body.run_id!r} on thread {body.thread_id!r} to continue: leave "
                    "Last-Event-ID out to start it."
                )
            create: RunCreate = await run_input.run_create(svc, assistant_id, body)
            run = await svc.create_run(body.thread_id, create)
        return await _respond(svc, slot, assistant_id, run, after)


@router.get(
    "/ag-ui/{assistant_id}/threads/{thread_id}/runs/{run_id}/stream",
    response_class=EventSourceResponse,
    responses=STREAM,
)
async def join(
    assistant_id: AssistantId,
    thread_id: ThreadId,
    run_id: RunId,
    svc: ServiceDep,
    request: Request,
    last_event_id: LastEventId = None,
    last_event_id_query: LastEventIdQuery = None,
) -> EventSourceResponse:
    """A run's AG-UI stream after ``Last-Event-ID`` (or ``?last_event_id=``; the header wins):
    ``run_id`` is the AG-UI ``runId`` or the threadline run id."""
    with _slot(request, svc) as slot:
        await svc.thread(thread_id, values=False)
        run = await _existing(svc, thread_id, run_id) or await svc.run(thread_id, run_id)
        last = last_event_id if last_event_id is not None else last_event_id_query
        return await _respond(svc, slot, assistant_id, run, resume_point.parse(last))


def _slot(request: Request, svc: Service) -> Slot:
    return claim_stream(request, svc.runtime.settings.max_streams_per_client)


async def _existing(svc: Service, thread_id: str, ag_ui_id: str) -> dict[str, Any] | None:
    """The thread's run started over AG-UI as ``ag_ui_id``; None when there is none (or the
    thread is not the caller's: creating the run says which)."""
    try:
        await svc.thread(thread_id, values=False)
    except NotFound:
        return None
    async with svc.pool.connection() as conn:
        return await run_lookup.by_metadata(conn, thread_id, {"ag_ui": {"run_id": ag_ui_id}})


async def _respond(
    svc: Service,
    slot: Slot,
    assistant_id: str,
    run: dict[str, Any],
    position: tuple[int, int | None],
) -> EventSourceResponse:
    after, part = position
    await check_after(svc, str(run["run_id"]), after)
    path = (assistant_id, run["thread_id"], ag_ui_run_id(run))
    where = "/ag-ui/{}/threads/{}/runs/{}/stream".format(*(quote(p, safe="") for p in path))
    return sse_response(
        frames(svc, run, after, part),
        {"Content-Location": where},
        slot=slot,
        send_timeout=svc.runtime.settings.sse_send_timeout_seconds,
    )
