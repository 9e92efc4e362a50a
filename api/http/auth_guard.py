"""The door every request passes: Host and Origin checks, then authentication.

- ``Host`` must be one of the allowed host names (loopback names by default,
  ``THREADLINE_ALLOWED_HOSTS``): a page on another site cannot reach a laptop server through DNS
  rebinding.
- A request whose ``Origin`` is neither the server's own nor in ``THREADLINE_CORS_ORIGINS`` is
  refused, whatever its method: a foreign page can neither change anything nor trigger a GET
  with side effects (``cancel_on_disconnect``). CORS itself (preflights, headers) is Starlette's
  ``CORSMiddleware``, outside this one.
- With authentication on, every route but ``/ok`` and the page's own files needs credentials:
  ``x-api-key``, ``Authorization: Bearer``, or the page's ``threadline_key`` cookie (sent to a
  custom authenticator as ``Authorization: Bearer <cookie>``, since ``EventSource`` cannot set
  headers). The caller is set for the request (``api.auth.context.caller``, and Starlette's
  ``request.user``). The project's own routes (``api.http.custom_app``) need none unless its
  ``http.enable_custom_route_auth`` says so, as on LangGraph.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import unquote, urlsplit

from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth import custom, keys
from api.auth.access import Access
from api.auth.context import set_caller
from api.auth.user import NOBODY, Unauthorized, User
from api.http.error_responses import database_fault_response
from api.platform.db_health import is_database_fault
from api.platform.errors import ApiError, Forbidden

logger = logging.getLogger(__name__)

PUBLIC = ("/ok", "/", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)
COOKIE = "threadline_key"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _hostname(host: str) -> str:
    if host.startswith("["):  # [::1]:8000
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def credentials(scope: Scope) -> tuple[str | None, str | None]:
    """(the API key, the Authorization header) a request carries."""
    authorization = _header(scope, b"authorization")
    api_key = _header(scope, b"x-api-key")
    if api_key is None and authorization and authorization.lower().startswith("bearer "):
        api_key = authorization[7:].strip()
    if api_key is None and authorization is None:
        cookie = _header(scope, b"cookie")
        if cookie:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(cookie)
            except Exception:
                jar = SimpleCookie()
            if COOKIE in jar and jar[COOKIE].value:
                api_key = unquote(jar[COOKIE].value)  # the page sets it URI-encoded
                authorization = f"Bearer {api_key}"
    return api_key, authorization


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        access: Access,
        allowed_hosts: Sequence[str],
        allowed_origins: Sequence[str],
        origin_regex: str | None = None,
        project: Callable[[Scope], bool] | None = None,
        project_auth: bool = False,
    ) -> None:
        """``origin_regex``: origins it matches are allowed too (CORS's ``allow_origin_regex``);
        ``project``: whether a request goes to the project's own routes (``api.http.custom_app``),
        which need credentials only with ``project_auth``, whatever their path; the API's
        public paths (``/ok``, the page) are public only as the API's."""
        self.app = app
        self.access = access
        self.any_host = "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts}
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.origin_regex = re.compile(origin_regex) if origin_regex else None
        self.project = project
        self.project_auth = project_auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        try:
            user = await self._check(scope)
        except ApiError as err:
            if scope["type"] == "websocket":  # a project's WebSocket route: refused unopened
                await send({"type": "websocket.close", "code": 1008, "reason": err.message[:120]})
                return
            headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
            response = JSONResponse({"detail": err.message}, err.status, headers=headers)
            await response(scope, receive, send)
            return
        except Exception as err:  # outside the app's handlers: a key lookup's database fault
            if not is_database_fault(err):
                raise
            await database_fault_response(Request(scope), err)(scope, receive, send)
            return
        set_caller(user)
        if user.is_authenticated:
            scope["user"], scope["auth"] = user, AuthCredentials(list(user.permissions))
        await self.app(scope, receive, send)

    async def _check(self, scope: Scope) -> User:
        host = _header(scope, b"host") or ""
        if not self.any_host and _hostname(host).lower() not in self.hosts:
            raise ApiError(
                f"Host {host!r} is not served here. The operator allows "
                "THREADLINE_ALLOWED_HOSTS (loopback names by default)."
            )
        origin = _header(scope, b"origin")
        if origin and origin != "null" and not self._origin_ok(origin, host):
            raise Forbidden(
                f"Origin {origin!r} is not allowed. The operator lists the browser origins that "
                "may use this server in THREADLINE_CORS_ORIGINS (or a langgraph.json's "
                '"http": {"cors": ...}).'
            )
        elif origin == "null":
            raise Forbidden("Requests from an opaque origin ('null') are not allowed.")
        if not self.access.enabled:
            return NOBODY
        if self.project is not None and self.project(scope):
            return await self._authenticate(scope) if self.project_auth else NOBODY
        path = scope.get("path", "")
        if path in PUBLIC or path.startswith(PUBLIC_PREFIXES):
            return NOBODY
        return await self._authenticate(scope)

    def _origin_ok(self, origin: str, host: str) -> bool:
        parts = urlsplit(origin)
        if parts.netloc.lower() == host.lower():
            return True  # the page's own origin
        if self.origin_regex is not None and self.origin_regex.fullmatch(origin):
            return True
        return origin.rstrip("/").lower() in self.origins or "*" in self.origins

    async def _authenticate(self, scope: Scope) -> User:
        api_key, authorization = credentials(scope)
        if self.access.mode == "custom" and self.access.auth is not None:
            # A WebSocket's handshake is a GET: the handlers see it as one.
            http_scope = scope if scope["type"] == "http" else {**scope, "type": "http"}
            request = Request({"method": "GET", **http_scope})
            return await custom.authenticate(self.access.auth, request, authorization)
        if not api_key:
            raise Unauthorized(
                "This server needs an API key: send it as x-api-key (the LangGraph SDKs' "
                "api_key) or Authorization: Bearer <key>. An operator creates one with "
                "`threadline keys create --identity NAME`."
            )
        service: Any = scope["app"].state.service
        async with service.pool.connection() as conn:
            user = await keys.lookup(conn, api_key)
        if user is None:
            raise Unauthorized("The API key is unknown or revoked.")
        return user
