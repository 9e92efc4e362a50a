"""``create_app(settings)``: the FastAPI application; its lifespan owns every long-lived part."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from api import errors
from api.graphs import load_graphs
from api.hub import Hub
from api.limits import BodyLimit
from api.routes import runs, system, threads, workspace
from api.runtime import BUILTIN_ASSISTANT, open_runtime
from api.service import Service
from api.settings import Settings
from api.worker import Workers

logger = logging.getLogger(__name__)


def dump_tasks() -> None:
    """Log the stack of every asyncio task (diagnostics, on SIGUSR1)."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        out.write(f"--- {task.get_name()}\n")
        task.print_stack(file=out)
    logger.warning("asyncio tasks:\n%s", out.getvalue())


STATIC = Path(__file__).parent / "static"


def create_app(settings: Settings) -> FastAPI:
    """The service: routes, error handlers, the web page, and a lifespan that starts it all."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings) as runtime:
            if settings.config:
                extra = await load_graphs(settings.config, runtime.saver)
                if BUILTIN_ASSISTANT in extra:
                    raise ValueError(
                        f"{settings.config} defines a graph named {BUILTIN_ASSISTANT!r}, which is "
                        "the built-in agent's id; rename it"
                    )
                runtime.graphs.update(extra)
            hub = Hub(runtime.database.url)
            await hub.start()
            workers = Workers(settings=settings, pool=runtime.pool, hub=hub, graphs=runtime.graphs)
            await workers.start()
            app.state.service = Service(runtime=runtime, hub=hub)
            with contextlib.suppress(NotImplementedError, RuntimeError):
                # `kill -USR1 <pid>` logs every asyncio task's stack: where a stuck run waits.
                asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_tasks)
            app.state.workers = workers
            logger.info(
                "threadline ready: model %s, database %s",
                settings.model_label,
                runtime.database.mode,
            )
            try:
                yield
            finally:
                await workers.stop()
                await hub.stop()

    app = FastAPI(
        title="threadline",
        summary="Durable LangGraph runs: threads, runs, SSE streams you can rejoin, approvals.",
        lifespan=lifespan,
    )
    errors.install(app)
    for module in (system, threads, runs, workspace):
        app.include_router(module.router)
    from api.routes import approvals

    app.include_router(approvals.router)

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app
