"""The project's app served as one route of the API's router (``api.http.custom_app``), in
process: its middleware runs once, in the service's stack, never again around its own routes;
its exception handlers, ``request.app`` and ``url_for`` are its own; the app itself is left as
the project wrote it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.applications import Starlette

from api.http.custom_app import CustomRoutes


def project_app(calls: list[str]) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def count(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        calls.append(request.url.path)
        return await call_next(request)

    @app.exception_handler(KeyError)
    async def missing(request: Request, exc: KeyError) -> JSONResponse:
        return JSONResponse({"missing": str(exc)}, status_code=418)

    @app.get("/custom/boom")
    async def boom() -> dict[str, str]:
        raise KeyError("x")

    @app.get("/custom/which")
    async def which(request: Request) -> dict[str, object]:
        return {"own_app": request.app is app, "url": str(request.url_for("which"))}

    return app


async def test_the_projects_app_runs_its_routes_without_running_its_middleware_again() -> None:
    calls: list[str] = []
    project = project_app(calls)
    routes = CustomRoutes(project, frozenset())
    service = Starlette(routes=[routes], middleware=routes.middleware)
    transport = httpx.ASGITransport(app=service)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        which = await http.get("/custom/which")
        assert which.status_code == 200, which.text
        assert which.json() == {"own_app": True, "url": "http://test/custom/which"}
        assert calls == ["/custom/which"]  # once: the service's stack ran it, the project's not
        boom = await http.get("/custom/boom")
        assert (boom.status_code, boom.json()) == (418, {"missing": "'x'"})
        assert calls == ["/custom/which", "/custom/boom"]
    assert len(project.user_middleware) == 1  # the project's app is as it was
