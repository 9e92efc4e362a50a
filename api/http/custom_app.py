"""The project's own Starlette or FastAPI app (``langgraph.json`` ``"http": {"app": ...}``),
served beside the API as LangGraph Server serves it (``langgraph_api/server.py``):

- Routes: the project's come first, so they may shadow the API's (``/threads``, ``/info``,
  ``/``, ...), except ``/ok``, ``/metrics``, ``/docs`` and ``/openapi.json`` (LangGraph's
  unshadowable routes; with ``disable_meta`` none is). A request one of its routes matches is
  handed to the project's app itself: its exception handlers, ``request.app`` (and its
  ``state``) and ``url_for`` are its own.
- Middleware: the project app's middleware wraps every route, the API's too. By default
  (``middleware_order: middleware_first``) it runs first, outside CORS and authentication;
  with ``auth_first``, after authentication (and CORS).
- Authentication: the API's routes keep threadline's (API keys or the config's ``auth``). The
  project's routes are not authenticated unless ``enable_custom_route_auth`` is true; the Host
  and Origin checks apply to them either way (``api.http.auth_guard``). An authenticated request
  carries ``request.user`` and ``request.auth``, as LangGraph's does.
- Lifespan: the project app's lifespan (or its startup and shutdown handlers) runs inside the
  service's: it starts after the database and workers are up and stops before them. The state
  it yields, if any, is every request's ``request.state``.

It is imported after the project's ``"env"`` and ``"dependencies"`` are applied
(``api.project.environment``), with the same rules as a graph's path
(``api.project.graphs.load_attr``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Match, NoMatchFound, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from api.http.auth_guard import Guard
from api.project.graphs import GraphConfigError, load_attr
from api.project.http_config import HttpOptions
from api.project.route_groups import UNSHADOWABLE, DisabledRoutes, prune, route_path


def load_app(config_file: Path | None, http: HttpOptions) -> Starlette | None:
    """The app ``http.app`` names (None without one); a :class:`GraphConfigError` unless it
    imports and is a Starlette (or FastAPI) app."""
    if config_file is None or http.app is None:
        return None
    target = http.app.rpartition(":")[0]
    path = (http.base / target).resolve()
    if (target.endswith(".py") or "/" in target) and not path.is_file():
        raise GraphConfigError(
            f'{config_file}: "http.app" names {path}, which is not a file (paths are relative '
            "to the config file)"
        )
    try:
        app = load_attr(http.app, http.base)
    except GraphConfigError as err:
        raise GraphConfigError(f'{config_file}: "http.app": {err}') from None
    if not isinstance(app, Starlette):
        raise GraphConfigError(
            f'{config_file}: "http.app" {http.app!r} is a {type(app).__name__}, not a Starlette '
            "or FastAPI application (app = FastAPI() or app = Starlette(routes=[...]))"
        )
    return app


def install(app: FastAPI, http: HttpOptions, project: Starlette | None) -> CustomRoutes | None:
    """Put the project's routes first in ``app``'s router (once all of the API's are in it),
    then the disabled groups' 404s; take those groups out of the OpenAPI document."""
    front: list[BaseRoute] = []
    routes = None
    if project is not None:
        routes = CustomRoutes(project, frozenset() if "meta" in http.disabled else UNSHADOWABLE)
        front.append(routes)
    if http.disabled:
        front.append(DisabledRoutes(http.disabled))
        document = app.openapi
        app.openapi = lambda: prune(document(), http.disabled)  # type: ignore[method-assign]
    app.router.routes[0:0] = front
    return routes


def serves(app: FastAPI, routes: CustomRoutes | None) -> Callable[[Scope], bool] | None:
    """For the guard: whether a request goes to the project's routes (authenticated only with
    ``enable_custom_route_auth``, whatever their path)."""
    if routes is None:
        return None
    return lambda scope: routes.serves(scope, app.router)


class CustomRoutes(BaseRoute):
    """The project app's routes, as one route first in the API's router."""

    def __init__(self, project: Starlette, unshadowable: frozenset[str]) -> None:
        self.project = project
        self.unshadowable = unshadowable
        # The service's middleware stack runs it (:func:`add_middleware`); the project's app is
        # served without it (:meth:`handle`), or it would run twice around the project's routes.
        self.middleware: list[Middleware] = list(project.user_middleware)
        self.stack: ASGIApp | None = None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] not in ("http", "websocket"):
            return Match.NONE, {}
        if route_path(scope) in self.unshadowable:
            return Match.NONE, {}
        partial = False
        for route in self.project.router.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return Match.FULL, {}
            partial = partial or match is Match.PARTIAL
        return (Match.PARTIAL if partial else Match.NONE), {}

    def serves(self, scope: Scope, router: Router) -> bool:
        """Whether ``router`` (the API's, this route first) hands the request to the project:
        a path and method its routes match, or a path only they have (their 405)."""
        match, _ = self.matches(scope)
        if match is not Match.PARTIAL:
            return match is Match.FULL
        return not any(r.matches(scope)[0] is Match.FULL for r in router.routes if r is not self)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The project's app as it serves a request, its own middleware left out: its error and
        exception handlers around its router, built by its own ``build_middleware_stack`` (once,
        at the first request, as it builds it), and ``scope["app"]`` the project's app (its
        ``request.app``, ``state`` and ``url_for``). Without the API's router in the scope: the
        project's sets itself."""
        if self.stack is None:
            bare = cast(Starlette, _WithoutMiddleware(self.project))
            self.stack = type(self.project).build_middleware_stack(bare)
        scope = {k: v for k, v in scope.items() if k != "router"}
        scope["app"] = self.project
        root_path = getattr(self.project, "root_path", "")  # FastAPI's, which it sets itself
        if root_path:
            scope["root_path"] = root_path
        await self.stack(scope, receive, send)


class _WithoutMiddleware:
    """The project's app as its ``build_middleware_stack`` reads it, with no middleware of its
    own (the app itself is left as it is)."""

    user_middleware: list[Middleware] = []

    def __init__(self, app: Starlette) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


def add_middleware(app: FastAPI, routes: CustomRoutes | None, http: HttpOptions) -> None:
    """Put the project's middleware into ``app``'s stack (once the API's is in it): outermost,
    or with ``auth_first`` right inside the guard (after CORS and authentication)."""
    if routes is None:
        return
    stack = app.user_middleware
    guard = next(i for i, m in enumerate(stack) if m.cls is cast(Any, Guard))
    at = guard + 1 if http.auth_first else 0
    stack[at:at] = routes.middleware


@asynccontextmanager
async def lifespan(app: Starlette | None) -> AsyncIterator[Mapping[str, Any] | None]:
    """The project app's lifespan (nothing without one); yields the state it yields."""
    if app is None:
        yield None
        return
    async with app.router.lifespan_context(app) as state:
        yield state
