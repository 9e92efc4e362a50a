"""LangGraph Server's custom auth: a ``langgraph_sdk.Auth`` object named in ``langgraph.json``.

``{"auth": {"path": "./auth.py:auth"}}`` (relative to the file). ``@auth.authenticate`` gets its
parameters by name, as on LangGraph Server: ``request``, ``path``, ``method``, ``path_params``,
``query_params``, ``headers`` (keys as bytes; str keys work too) and ``authorization``. It returns
an identity string, or a user dict (``identity``, ``permissions``, ``display_name``, ...). Its
``Auth.exceptions.HTTPException`` becomes that status; any other failure is a 401.

``@auth.on...`` handlers are looked up most specific first: (resource, action), (resource, *),
(*, action), then the global ``@auth.on``. A handler may edit ``value`` (add metadata), return a
filter, return ``False`` (403), or raise.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth
from langgraph_sdk.auth.exceptions import HTTPException as AuthHTTPException
from langgraph_sdk.auth.types import AuthContext
from starlette.requests import Request

from api.auth.user import Unauthorized, User
from api.platform.errors import ApiError, Forbidden
from api.project.graphs import GraphConfigError, load_attr
from api.store.filters import Filter

logger = logging.getLogger(__name__)


class _Headers(dict[bytes, bytes]):
    """Request headers keyed by lower-case bytes, as LangGraph passes them; ``get("x-api-key")``
    with a str key answers with a str, so handlers written either way work."""

    def get(self, key: Any, default: Any = None) -> Any:
        if isinstance(key, str):
            value = super().get(key.lower().encode("latin-1"))
            return value.decode("latin-1") if value is not None else default
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            key = key.lower().encode("latin-1")
        return super().__contains__(key)


@dataclass(frozen=True)
class Handlers:
    """What ``@auth.authenticate`` and the ``@auth.on`` decorators registered on an ``Auth``."""

    authenticate: Any | None
    on: Mapping[tuple[str, str], Any]
    """(resource, action) → its handler; ``*`` stands for any resource or any action."""
    on_all: Any | None
    """The global ``@auth.on`` handler."""


def registered(auth: Auth) -> Handlers:
    """The handlers registered on ``auth``.

    ``langgraph_sdk`` (0.4.14, the newest release) offers registration only: ``authenticate``
    and the ``on`` decorators store a handler and hand it back unchanged, and nothing public
    reads one back (``on`` is the one public field of ``Auth``; the objects under it hold the
    ``Auth``, a resource, an action and a value type). A server has to read what was
    registered, as LangGraph Server does: this function is the one place that reads the private
    fields ``Auth`` keeps them in (the last handler registered for a key wins, as there)."""
    return Handlers(
        authenticate=auth._authenticate_handler,
        on={key: found[-1] for key, found in auth._handlers.items() if found},
        on_all=auth._global_handlers[-1] if auth._global_handlers else None,
    )


class HandlerError(ApiError):
    """An authorization handler's own HTTPException, with its status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def load_auth(config_file: Path) -> Auth | None:
    """The ``Auth`` object of the file's ``"auth": {"path": ...}``, or None without one."""
    import json

    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise GraphConfigError(f"cannot read {config_file}: {err}") from None
    spec = (data.get("auth") or {}).get("path") if isinstance(data, dict) else None
    if not spec:
        return None
    obj = load_attr(str(spec), config_file.absolute().parent)
    if not isinstance(obj, Auth):
        raise GraphConfigError(f"auth {spec!r} in {config_file} is not a langgraph_sdk.Auth")
    if registered(obj).authenticate is None:
        raise GraphConfigError(f"auth {spec!r} has no @auth.authenticate handler")
    return obj


async def authenticate(auth: Auth, request: Request, authorization: str | None) -> User:
    """Run ``@auth.authenticate`` for one request (``authorization`` as the caller sent it)."""
    handler = registered(auth).authenticate
    assert handler is not None
    available: dict[str, Any] = {
        "request": request,
        "path": request.url.path,
        "method": request.method,
        "path_params": dict(request.path_params),
        "query_params": dict(request.query_params),
        "headers": _Headers((k.lower(), v) for k, v in request.scope.get("headers", [])),
        "authorization": authorization,
        "scopes": [],
    }
    names = inspect.signature(handler).parameters
    kwargs = {name: available.get(name) for name in names if name in available}
    try:
        result = await handler(**kwargs)
    except AuthHTTPException as err:
        raise HandlerError(err.status_code, str(err.detail or "not authenticated")) from None
    except Exception as err:  # an assert, a bad token, a bug: the caller is not authenticated
        logger.info("authentication failed: %s: %s", type(err).__name__, err)
        raise Unauthorized(
            "Not authenticated: send the credentials this server expects "
            "(Authorization: Bearer <token>, or x-api-key)."
        ) from None
    try:
        return User.from_result(result)
    except ValueError as err:
        logger.error("the authenticate handler returned %r: %s", result, err)
        raise Unauthorized(
            "Not authenticated: the server's auth handler returned no identity."
        ) from None


def find_handler(auth: Auth, resource: str, action: str) -> Any | None:
    """The most specific handler for (resource, action), or None."""
    handlers = registered(auth)
    for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
        found = handlers.on.get(key)
        if found is not None:
            return found
    return handlers.on_all


async def authorize(
    auth: Auth, user: User, resource: str, action: str, value: dict[str, Any]
) -> tuple[bool, Filter | None]:
    """Run the handler for (resource, action) on ``value`` (which it may edit).

    Returns (whether a handler applied, its filter). Raises 403 when it returns ``False``, its
    own status when it raises ``HTTPException``, 403 for any other failure.
    """
    handler = find_handler(auth, resource, action)
    if handler is None:
        return False, None
    ctx = AuthContext(
        permissions=list(user.permissions),
        user=user,  # implements the BaseUser protocol
        resource=resource,  # type: ignore[arg-type]
        action=action,  # type: ignore[arg-type]
    )
    try:
        result = await handler(ctx=ctx, value=value)
    except AuthHTTPException as err:
        raise HandlerError(err.status_code, str(err.detail or "forbidden")) from None
    except Exception as err:
        logger.warning("auth handler for %s.%s failed: %s: %s", resource, action, type(err), err)
        raise Forbidden(f"Not allowed to {action} {resource}.") from None
    if result is False:
        raise Forbidden(f"Not allowed to {action} {resource}.")
    if result is None or result is True:
        return True, None
    if isinstance(result, Mapping):
        return True, dict(result)
    logger.error("auth handler for %s.%s returned %r", resource, action, result)
    raise Forbidden(f"Not allowed to {action} {resource}.")
