"""The caller of the request being served, for the service's tenant checks.

The guard sets it for every request before any route runs (a ``ContextVar``: each request's task
sees its own); code outside a request (workers, the CLI) sees ``NOBODY``.
"""

from __future__ import annotations

from contextvars import ContextVar

from api.auth.user import NOBODY, User

_caller: ContextVar[User] = ContextVar("threadline_caller", default=NOBODY)


def set_caller(user: User) -> None:
    _caller.set(user)


def caller() -> User:
    """Who is asking (``NOBODY`` without authentication)."""
    return _caller.get()
