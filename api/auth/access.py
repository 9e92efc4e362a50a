"""Who may see and do what: every thread has an owner, and everything that hangs off a thread
(runs, events, interrupts, audit, files) follows it. Another tenant's thread is not found (404).

Modes (``/info`` says which):
- ``none``: no authentication; the server binds loopback only (``THREADLINE_AUTH=none``).
- ``keys``: built-in API keys (``threadline keys create``).
- ``custom``: a ``langgraph_sdk.Auth`` named in ``langgraph.json``.

A thread is visible to a caller when the authorization handler for the action allows it and its
filter matches the thread's metadata (LangGraph Server's semantics). Where no handler applies,
the default rule is ownership: the caller must be the thread's owner. A caller with the review
permission (``THREADLINE_REVIEW_PERMISSION``) may read and approve any thread; when the operator
sets ``THREADLINE_APPROVE_PERMISSION``, approving needs that permission, owners included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langgraph_sdk import Auth

from api.auth import custom
from api.auth.user import NOBODY, User
from api.platform.errors import Forbidden
from api.store.filters import Filter, matches, to_sql

Mode = Literal["none", "keys", "custom"]
READS = frozenset({"read", "search"})


@dataclass(frozen=True)
class Scope:
    """Which threads one caller may act on for one action."""

    owner: str | None = None
    """Only threads of this owner; None: any owner (no auth, a handler decided, a reviewer)."""
    flt: Filter | None = None
    """The handler's filter over thread metadata."""

    def allows(self, thread: Mapping[str, Any]) -> bool:
        if self.owner is not None and thread.get("owner") != self.owner:
            return False
        return matches(self.flt, thread.get("metadata") or {})

    def where(self, alias: str = "t") -> tuple[str, list[Any]]:
        """A SQL condition over ``threads`` (as ``alias``) and its parameters."""
        sql, params = to_sql(self.flt, f"{alias}.metadata")
        if self.owner is not None:
            sql = f"{alias}.owner = %s AND {sql}"
            params = [self.owner, *params]
        return sql, params


EVERYTHING = Scope()


@dataclass(frozen=True)
class Access:
    mode: Mode = "none"
    auth: Auth | None = None
    review_permission: str = "threadline:review"
    approve_permission: str | None = None

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    async def scope(
        self,
        user: User,
        action: str,
        value: dict[str, Any] | None = None,
        resource: str = "threads",
    ) -> Scope:
        """The caller's scope for ``<resource>.<action>`` (threads, or assistants, which have
        owners too); ``value`` is what the handler sees and may edit (a new thread's metadata,
        say). Raises 403 when a handler refuses."""
        if not self.enabled or user is NOBODY:
            return EVERYTHING
        if self.auth is not None:
            applied, flt = await custom.authorize(
                self.auth, user, resource, action, value if value is not None else {}
            )
            if applied:
                return Scope(owner=None, flt=flt)
        # Reviewers read every tenant's threads (their runs and approvals), not their assistants:
        # reading an assistant is running it (api.runs.assistant_access.for_run).
        if action in READS and resource == "threads" and self.review_permission in user.permissions:
            return EVERYTHING
        return Scope(owner=user.identity)

    async def approval_scope(self, user: User, value: dict[str, Any]) -> Scope:
        """Who may answer a thread's approvals: its run creators, reviewers, and, when the
        operator names an approve permission, only those who have it."""
        if not self.enabled or user is NOBODY:
            return EVERYTHING
        if self.approve_permission and self.approve_permission not in user.permissions:
            raise Forbidden(
                f"Answering approvals needs the {self.approve_permission!r} permission, which "
                "this identity lacks; ask the operator for it."
            )
        if self.review_permission in user.permissions:
            return EVERYTHING
        return await self.scope(user, "create_run", value)

    async def check(self, user: User, resource: str, action: str, value: dict[str, Any]) -> None:
        """Run the handler of a resource checked by its handler alone (crons); it may refuse."""
        if self.auth is not None and user is not NOBODY:
            await custom.authorize(self.auth, user, resource, action, value)

    def owner_of_new(self, user: User) -> str | None:
        """The owner recorded for a thread this caller creates."""
        return user.identity if self.enabled and user is not NOBODY else None


def access_from(settings: Any) -> Access:
    """The access rules of a deployment: a ``langgraph.json`` with ``"auth"`` (custom) wins over
    ``THREADLINE_AUTH`` (``keys`` or ``none``)."""
    auth = custom.load_auth(settings.config) if settings.config else None
    mode: Mode = "custom" if auth is not None else settings.auth
    return Access(
        mode=mode,
        auth=auth,
        review_permission=settings.review_permission,
        approve_permission=settings.approve_permission,
    )
