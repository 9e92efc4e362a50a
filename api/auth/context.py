"""The caller of the request being served, for the service's tenant checks, and the door it came
through, for the audit log.

The guard sets the caller for every request before any route runs (a ``ContextVar``: each
request's task sees its own); code outside a request (workers, the CLI) sees ``NOBODY``. A
protocol's endpoint sets its door (``a2a``, ``ag-ui``, ``mcp``) before it acts for the caller;
everything else is the LangGraph API's (``http``), the approvals page included.
"""

from __future__ import annotations

from contextvars import ContextVar

from api.auth.user import NOBODY, User

_caller: ContextVar[User] = ContextVar("threadline_caller", default=NOBODY)
_door: ContextVar[str] = ContextVar("threadline_door", default="http")


def set_caller(user: User) -> None:
    _caller.set(user)


def caller() -> User:
    """Who is asking (``NOBODY`` without authentication)."""
    return _caller.get()


def set_door(name: str) -> None:
    """The protocol the current request came through (``a2a``, ``ag-ui``, ``mcp``)."""
    _door.set(name)


def door() -> str:
    """The protocol the current request came through: ``http`` for the LangGraph API."""
    return _door.get()
