"""What each A2A call carries into the handler (``ServerCallContext.state``), built in the
request's own task by the SDK's dispatcher: the assistant of the path, the service, the caller the
Guard authenticated (so that code the SDK runs elsewhere, a stream's generator, acts as the same
caller: :func:`acting`), and a stream position from ``Last-Event-ID``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.utils.errors import A2AError, InternalError, InvalidParamsError
from pydantic import ValidationError
from starlette.requests import Request

from api.auth.context import caller, door, set_caller, set_door
from api.platform.db_health import is_database_fault
from api.platform.errors import ApiError, NotFound
from api.runs import assistant_access
from api.runs.assistant_config import RunAssistant
from api.runs.service import Service

ASSISTANT = "threadline.assistant_id"
SERVICE = "threadline.service"
CALLER = "threadline.caller"
LAST_EVENT_ID = "threadline.last_event_id"
BASE_URL = "threadline.base_url"


class ContextBuilder(DefaultServerCallContextBuilder):
    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)  # the headers too: the SDK reads A2A-Version there
        context.state[ASSISTANT] = request.path_params.get("assistant_id", "")
        context.state[SERVICE] = request.app.state.service
        context.state[CALLER] = caller()
        context.state[LAST_EVENT_ID] = request.headers.get("last-event-id")
        context.state[BASE_URL] = str(request.base_url)
        return context


@contextmanager
def acting(context: ServerCallContext) -> Iterator[Service]:
    """The service, with the call's caller (and the door, ``a2a``) set meanwhile."""
    previous, previous_door = caller(), door()
    set_caller(context.state[CALLER])
    set_door("a2a")
    try:
        yield context.state[SERVICE]
    finally:
        set_caller(previous)
        set_door(previous_door)


def last_event(context: ServerCallContext) -> tuple[str | None, int, int | None] | None:
    """The position ``Last-Event-ID`` names: ``<run id>:<seq>[.<part>]`` (or ``<seq>[.<part>]``:
    of the task's latest run); None without one."""
    raw: Any = context.state.get(LAST_EVENT_ID)
    if raw is None or raw == "":
        return None
    run_id, _, where = str(raw).rpartition(":")
    seq, dot, part = where.partition(".")
    if not _number(seq) or (dot and not _number(part)):
        raise InvalidParamsError(
            f"Last-Event-ID {str(raw)[:100]!r} is not a position: send the metadata.threadline "
            'of the last event you got as "<run_id>:<seq>" (and ".<part>" when it has one).'
        )
    return (run_id or None), int(seq), (int(part) if dot else None)


def _number(text: str) -> bool:
    return text.isdigit() and len(text) <= 18


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """threadline's errors as A2A errors that say what to do."""
    try:
        yield
    except A2AError:
        raise
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in err.errors()
        )
        raise InvalidParamsError(f"Invalid request: {problems}"[:2000]) from None
    except ApiError as err:
        if err.status >= 500:
            raise InternalError(err.message) from None
        raise InvalidParamsError(err.message) from None
    except Exception as err:
        if is_database_fault(err):
            raise InternalError(
                "The database is unavailable for a moment; send it again."
            ) from None
        raise


async def assistant(svc: Service, context: ServerCallContext) -> RunAssistant:
    """The assistant of ``/a2a/{assistant_id}``."""
    name = context.state.get(ASSISTANT, "")
    try:
        return await assistant_access.for_run(svc, name)
    except NotFound as err:
        raise InvalidParamsError(f"{err.message} The A2A endpoint is /a2a/<assistant>.") from None
