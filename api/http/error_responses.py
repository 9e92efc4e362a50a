"""Errors as HTTP answers: each :class:`~api.platform.errors.ApiError` with its status and
message, validation errors said in one line, a database outage as ``503`` with ``Retry-After``,
and a last resort that logs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.platform.db_health import (
    RETRY_AFTER_SECONDS,
    DatabaseHealth,
    DatabaseUnavailable,
    describe,
    is_database_fault,
)
from api.platform.errors import ApiError
from api.platform.validation import THREAD_ID_RULE

logger = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    """Every error answer (4xx, and 5xx): one message that says what went wrong and what to do."""

    detail: str = Field(description="What went wrong and what to do about it.")


WHY = {
    400: "The request cannot be read.",
    403: "Not allowed by the deployment's policy.",
    404: "No such thread, run, assistant or file.",
    409: "Conflicts with the thread's current state (a run is active, or already answered).",
    413: "The request body is larger than THREADLINE_MAX_BODY_BYTES.",
    422: "The request is malformed: a parameter or the body is invalid (the detail says which).",
    503: "The database is unreachable or busy: retry after the Retry-After header's seconds.",
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` for the error statuses a route can answer, all ``ErrorBody``."""
    return {s: {"model": ErrorBody, "description": WHY[s]} for s in statuses}


def _location(loc: tuple[object, ...]) -> str:
    parts = [str(p) if str(p).isprintable() else repr(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def _problem(e: dict[str, Any]) -> str:
    where = _location(tuple(e.get("loc", ())))
    if e.get("type") == "json_invalid":
        return f"the body is not valid JSON ({e.get('ctx', {}).get('error', '')})"
    if tuple(e.get("loc", ())) == ("body",) and isinstance(e.get("input"), bytes | str):
        return (
            "the body must be a JSON object sent with Content-Type: application/json "
            f"({e.get('msg')})"
        )
    if e.get("type") == "string_pattern_mismatch" and where.endswith("thread_id"):
        return f"{where}: a thread id is {THREAD_ID_RULE}"
    return f"{where}: {e.get('msg')}"


def _json(detail: str, status: int, headers: Mapping[str, str] | None = None) -> JSONResponse:
    # A message may quote what the client sent: never let it make the answer unencodable.
    safe = detail.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"detail": safe}, status_code=status, headers=headers)


def _health(request: Request) -> DatabaseHealth | None:
    service = getattr(request.app.state, "service", None)
    return getattr(getattr(service, "pool", None), "health", None)


def database_fault_response(request: Request, err: BaseException) -> JSONResponse:
    """``503`` with ``Retry-After`` for a request the database's absence stopped. The outage is
    logged once, by the health watch (``api.platform.db_health``), not once per request."""
    health = _health(request)
    if isinstance(err, DatabaseUnavailable):
        detail = str(err)
    else:
        if health is not None:
            health.fault(err)
        if health is not None and health.down:
            detail = str(DatabaseUnavailable(health.why))
        else:
            detail = (
                f"The database connection failed ({describe(err)}); the request was not carried "
                f"out. Retry in {RETRY_AFTER_SECONDS} s."
            )
    logger.debug("%s %s: 503, %s", request.method, request.url.path, describe(err))
    return _json(detail, 503, {"Retry-After": str(RETRY_AFTER_SECONDS)})


def install(app: FastAPI) -> None:
    """Register the handlers: our errors, validation errors, and a last resort that logs."""

    @app.exception_handler(ApiError)
    async def api_error(_: Request, err: ApiError) -> JSONResponse:
        return _json(err.message, err.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = list(dict.fromkeys(_problem(e) for e in err.errors()))
        if len(problems) > 10:
            problems = [*problems[:10], f"and {len(problems) - 10} more"]
        return _json("Invalid request: " + "; ".join(problems) + ". See /docs for the schema.", 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        detail = err.detail
        if err.status_code == 404 and detail == "Not Found":
            detail = "No such endpoint. See /docs for the API."
        if err.status_code == 405:
            detail = "Method not allowed on this path. See /docs for the API."
        if err.status_code == 400 and detail == "There was an error parsing the body":
            # FastAPI's answer to a body it could not decode (the routes parse bodies first).
            return _json("Invalid request: the body must be UTF-8 JSON. See /docs.", 422)
        return _json(str(detail), err.status_code, err.headers)

    @app.exception_handler(DatabaseUnavailable)
    async def unavailable(request: Request, err: DatabaseUnavailable) -> JSONResponse:
        return database_fault_response(request, err)

    @app.exception_handler(psycopg.Error)
    async def database_error(request: Request, err: psycopg.Error) -> JSONResponse:
        if is_database_fault(err):
            return database_fault_response(request, err)
        return _internal(err)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, err: Exception) -> JSONResponse:
        if is_database_fault(err):  # wrapped in another error
            return database_fault_response(request, err)
        return _internal(err)


def _internal(err: Exception) -> JSONResponse:
    """The last resort: the traceback to the log, a 500 that says where to look."""
    logger.error("unhandled error", exc_info=err)
    return JSONResponse(
        {"detail": f"Internal error ({type(err).__name__}); the server log has the details."},
        status_code=500,
    )
