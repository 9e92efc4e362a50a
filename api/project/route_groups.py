"""Route groups a ``langgraph.json``'s ``http.disable_<group>`` turns off, as LangGraph Server
groups its routes (``langgraph_api/api/__init__.py``): a disabled group's paths answer 404, as
if they did not exist, and leave the OpenAPI document; the project's own routes
(``api.http.custom_app``) come before and may still use those paths.

- ``assistants``: ``/assistants/...``; ``store``: ``/store/...``; ``mcp``: ``/mcp``.
- ``runs``: ``/runs/...`` (schedules too) and ``/threads/{id}/runs/...``.
- ``threads``: the rest of ``/threads/...``, threadline's approvals, audit and workspace
  included; a thread's MCP endpoint (``/threads/{id}/mcp``) is in ``threads`` and ``mcp``, its
  approvals (which queue a run) in ``threads`` and ``runs``.
- ``meta``: ``/info``, ``/metrics``, ``/docs``, ``/openapi.json`` and threadline's page (``/``,
  ``/static/...``); ``/ok`` stays, as on LangGraph.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocketClose

META_PATHS = frozenset(
    {"/", "/favicon.ico", "/info", "/metrics", "/docs", "/docs/oauth2-redirect", "/redoc"}
    | {"/openapi.json"}
)
UNSHADOWABLE = frozenset(
    {"/ok", "/metrics", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
)
"""Served before the project's routes, as LangGraph's ``unshadowable_meta_routes`` (with
``disable_meta`` there are none: the project may use these paths)."""


def route_path(scope: Scope) -> str:
    """The request's path below the app's ``root_path`` (what its routes match)."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path


def groups_of(path: str) -> frozenset[str]:
    """The groups a path (or an OpenAPI path template) belongs to; none: always served."""
    parts = path.split("/")
    head = parts[1] if len(parts) > 1 else ""
    if head in ("assistants", "store", "runs", "mcp"):
        return frozenset({head})
    if head == "threads":
        below = parts[3] if len(parts) > 3 else ""
        if below == "runs":
            return frozenset({"runs"})
        if below in ("mcp", "approvals"):  # an approval queues the run that answers it
            return frozenset({"threads", "runs" if below == "approvals" else "mcp"})
        return frozenset({"threads"})
    if path in META_PATHS or head == "static":
        return frozenset({"meta"})
    return frozenset()


class DisabledRoutes(BaseRoute):
    """Answers every request to a disabled group's path with 404, before the API's routes."""

    def __init__(self, disabled: frozenset[str]) -> None:
        self.disabled = disabled

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] in ("http", "websocket") and self.disabled & groups_of(route_path(scope)):
            return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await WebSocketClose()(scope, receive, send)
            return
        raise HTTPException(404)  # the app's answer to a path it does not serve


def prune(schema: dict[str, Any], disabled: frozenset[str]) -> dict[str, Any]:
    """The OpenAPI document without the disabled groups' paths (in place)."""
    paths = schema.get("paths", {})
    for path in [p for p in paths if disabled & groups_of(p)]:
        del paths[path]
    return schema
