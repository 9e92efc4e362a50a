"""Errors a client can cause, each with a message that says what to do, mapped to HTTP once."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """Base: ``status`` and a message for the client."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class Invalid(ApiError):
    status = 422


class TooLarge(ApiError):
    status = 413


def _location(loc: tuple[object, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    """Register the handlers: our errors, validation errors, and a last resort that logs."""

    @app.exception_handler(ApiError)
    async def api_error(_: Request, err: ApiError) -> JSONResponse:
        return JSONResponse({"detail": err.message}, status_code=err.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = []
        for e in err.errors():
            if e.get("type") == "json_invalid":
                problems.append(f"the body is not valid JSON ({e.get('ctx', {}).get('error', '')})")
            else:
                problems.append(f"{_location(tuple(e.get('loc', ())))}: {e.get('msg')}")
        return JSONResponse(
            {"detail": "Invalid request: " + "; ".join(problems) + ". See /docs for the schema."},
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        detail = err.detail
        if err.status_code == 404 and detail == "Not Found":
            detail = "No such endpoint. See /docs for the API."
        if err.status_code == 405:
            detail = "Method not allowed on this path. See /docs for the API."
        return JSONResponse({"detail": detail}, status_code=err.status_code)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, err: Exception) -> JSONResponse:
        logger.exception("unhandled error")
        return JSONResponse(
            {"detail": f"Internal error ({type(err).__name__}); the server log has the details."},
            status_code=500,
        )
