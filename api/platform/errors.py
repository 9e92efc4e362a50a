"""Errors a client can cause, each with a message that says what to do (``api.http.error_responses``
maps them to HTTP, once)."""

from __future__ import annotations


class ApiError(Exception):
    """Base: ``status`` and a message for the client."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(ApiError):
    status = 404


class Forbidden(ApiError):
    status = 403


class Conflict(ApiError):
    status = 409


class Invalid(ApiError):
    status = 422
