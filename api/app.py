"""``create_app(settings)``: the FastAPI application; its lifespan owns every long-lived part."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route

from api.auth.access import access_from
from api.builtin_agent import mcp_server
from api.builtin_agent import routes as agent_routes
from api.http import custom_app, error_responses, mcp_runs
from api.http.a2a import routes as a2a_routes
from api.http.ag_ui import endpoint as ag_ui_routes
from api.http.auth_guard import PUBLIC, Guard
from api.http.body_limit import BodyLimit
from api.http.json_body import MAX_JSON_DEPTH
from api.http.routes import (
    approvals,
    assistants,
    metrics,
    runs,
    runs_cancel,
    runs_extra,
    system,
    thread_state,
    threads,
)
from api.http.routes import crons as crons_routes
from api.http.routes import store as store_routes
from api.http.service_metrics import ServiceMetrics
from api.lifecycle import open_service
from api.platform.settings import Settings
from api.platform.validation import (
    MAX_ID_LENGTH,
    MAX_WORKSPACE_PATH,
    METADATA_MAX_BYTES,
    METADATA_MAX_DEPTH,
    THREAD_ID_RULE,
)
from api.project.environment import prepare_project
from api.project.http_config import read_http
from api.runs import thread_ttl

logger = logging.getLogger(__name__)


def dump_tasks() -> None:
    """Log the stack of every asyncio task (diagnostics, on SIGUSR1)."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        out.write(f"--- {task.get_name()}\n")
        task.print_stack(file=out)
    logger.warning("asyncio tasks:\n%s", out.getvalue())


STATIC = Path(__file__).parent / "static"

LINKS: dict[tuple[str, str], tuple[dict[str, str], list[tuple[str, str]]]] = {
    # (method, path) of a response → (its parameters, the operations they feed)
    ("post", "/threads"): (
        {"thread_id": "$response.body#/thread_id"},
        [
            ("get", "/threads/{thread_id}"),
            ("patch", "/threads/{thread_id}"),
            ("get", "/threads/{thread_id}/state"),
            ("post", "/threads/{thread_id}/history"),
            ("post", "/threads/{thread_id}/runs"),
            ("get", "/threads/{thread_id}/runs"),
            ("get", "/threads/{thread_id}/workspace"),
            ("get", "/threads/{thread_id}/audit"),
            ("post", "/threads/{thread_id}/approvals"),
            ("delete", "/threads/{thread_id}"),
        ],
    ),
    ("post", "/threads/{thread_id}/runs"): (
        {"thread_id": "$response.body#/thread_id", "run_id": "$response.body#/run_id"},
        [
            ("get", "/threads/{thread_id}/runs/{run_id}"),
            ("get", "/threads/{thread_id}/runs/{run_id}/join"),
            ("get", "/threads/{thread_id}/runs/{run_id}/stream"),
            ("post", "/threads/{thread_id}/runs/{run_id}/cancel"),
        ],
    ),
}
"""OpenAPI links: the ids a response returns, for the operations that take them."""


API_RULES = f"""
Errors are JSON `{{"detail": "..."}}`, a message that says what to do.

What the service refuses at the door (422, naming where in the body): a body that is not UTF-8
JSON; `NaN` or `Infinity`, or a number too large to be finite; an integer outside 64 bits
(-2^63 to 2^63 - 1); a NUL character (`\\u0000`) or an unpaired surrogate in any string or key;
nesting deeper than {MAX_JSON_DEPTH} levels. Thread and run metadata: at most
{METADATA_MAX_DEPTH} levels deep and {METADATA_MAX_BYTES} bytes as compact JSON (a thread's,
after a PATCH merged into it). Ids: at most {MAX_ID_LENGTH} characters; a thread id is
{THREAD_ID_RULE}. Workspace paths: at most {MAX_WORKSPACE_PATH} characters. Bodies over
`THREADLINE_MAX_BODY_BYTES`: 413.
"""


def _openapi(app: FastAPI, authenticated: bool = False) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document as the API behaves: every error body is ``ErrorBody`` JSON (also on
    the SSE routes, whose 200 is an event stream), and responses link to what their ids feed."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = FastAPI.openapi(app)
        paths = schema.get("paths", {})
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        for path, item in paths.items():
            for operation in item.values():
                if authenticated and path not in PUBLIC:
                    operation.setdefault("responses", {})["401"] = {
                        "description": "No credentials, or credentials the server refused."
                    }
                for status, response in operation.get("responses", {}).items():
                    if status[:1] in ("4", "5"):
                        response["content"] = error
        for (method, path), (parameters, targets) in LINKS.items():
            source = paths.get(path, {}).get(method)
            if source is None:
                continue
            links = source["responses"].setdefault("200", {}).setdefault("links", {})
            for target_method, target_path in targets:
                target = paths.get(target_path, {}).get(target_method)
                if target is None:
                    continue
                names = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
                links[target["operationId"]] = {
                    "operationId": target["operationId"],
                    "parameters": {k: v for k, v in parameters.items() if k in names},
                }
        return schema

    return build


def create_app(settings: Settings) -> FastAPI:
    """The service: routes, error handlers, the web page, and a lifespan that starts it all.
    A ``langgraph.json`` project that cannot be set up or imported raises ``GraphConfigError``."""
    if settings.config:
        prepare_project(settings.config)  # its env and code, before its auth or graphs import
    http = read_http(settings.config)  # its "http" (api.project.http_config), then its app, if any
    project_app = custom_app.load_app(settings.config, http)
    ttl = thread_ttl.read_ttl(settings.config, settings.ttl_sweep_seconds)
    access = access_from(settings)

    mcp_servers = {"assistants": mcp_runs.assistants_server(), "thread": mcp_server.thread_server()}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[Any]:  # the project app's state
        async with (
            open_service(settings, access, webhooks=not http.disable_webhooks) as service,
            mcp_runs.serve(app, mcp_servers),  # stopped before the service
            thread_ttl.sweeping(service, ttl),
            custom_app.lifespan(project_app) as state,  # the project's: up last, stopped first
        ):
            app.state.service = service
            with contextlib.suppress(NotImplementedError, RuntimeError):
                # `kill -USR1 <pid>` logs every asyncio task's stack: where a stuck run waits.
                asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_tasks)
            logger.info(
                "threadline ready: model %s, database %s",
                agent_routes.agent_of(service).settings.model_label,
                service.runtime.database.mode,
            )
            yield state

    app = FastAPI(
        title="threadline",
        summary="Durable LangGraph runs: threads, runs, SSE streams you can rejoin, approvals.",
        description=API_RULES,
        lifespan=lifespan,
    )
    error_responses.install(app)
    app.openapi = _openapi(app, access.enabled)  # type: ignore[method-assign]
    app.include_router(crons_routes.router)  # schedules (api.runs.scheduler), before /runs/{id}
    for module in (
        system,
        metrics,  # /metrics, guarded like every route but /ok
        assistants,
        threads,
        runs,
        runs_cancel,
        runs_extra,
        approvals,
        agent_routes,
    ):
        app.include_router(module.router)
    app.include_router(thread_state.router)  # count, state at a checkpoint, update, copy
    app.include_router(store_routes.router)  # long-term memory (api.runs.memory)
    app.include_router(ag_ui_routes.router)  # AG-UI 1.0 (api.http.ag_ui)

    # MCP over Streamable HTTP (plain ASGI routes: outside the OpenAPI document).
    app.router.routes += [
        Route("/mcp", mcp_runs.McpEndpoint("assistants"), include_in_schema=False),
        Route(
            "/threads/{thread_id}/mcp",
            mcp_runs.McpEndpoint("thread", mcp_server.precheck),
            include_in_schema=False,
        ),
    ]
    app.router.routes += a2a_routes.routes()  # A2A JSON-RPC and agent cards (api.http.a2a)

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    project_routes = custom_app.install(app, http, project_app)  # first: they may shadow ours
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    cors = http.cors_options(settings.cors_origins)
    app.add_middleware(
        Guard,
        access=access,
        allowed_hosts=allowed_hosts(settings),
        allowed_origins=cors["allow_origins"],
        origin_regex=cors.get("allow_origin_regex"),
        project=custom_app.serves(app, project_routes),
        project_auth=http.custom_route_auth,
    )
    # Outermost: preflights are answered before the guard (they carry no credentials).
    app.add_middleware(CORSMiddleware, **cors)
    custom_app.add_middleware(app, project_routes, http)  # outermost, or inside the guard
    app.state.access = access
    app.state.metrics = ServiceMetrics()  # a registry of this app's own (api.platform.metrics)
    return app


def allowed_hosts(settings: Settings) -> list[str]:
    """The Host names served: the configured ones, plus the address bound when it is a name."""
    hosts = list(settings.allowed_hosts)
    if settings.host not in ("0.0.0.0", "::", "") and settings.host not in hosts:
        hosts.append(settings.host)
    return hosts
