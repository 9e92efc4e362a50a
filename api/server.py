"""``threadline serve``: uvicorn around ``create_app``; and the same service inside the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType

import uvicorn
from fastapi import FastAPI

from api.app import create_app
from api.http.stream_limits import expose_transport
from api.platform.logs import configure_logging, uvicorn_log_config
from api.platform.settings import Settings
from api.project.graphs import GraphConfigError


def serve(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    config: str | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; shutdown hands running runs back (see ``Workers.stop``), then
    the process exits normally (status 0), stopping the embedded PostgreSQL if it was its last
    live user."""
    if config:
        settings = settings.model_copy(update={"config": Path(config)})
    if host:
        settings = settings.model_copy(update={"host": host})
    # uvicorn shuts down on SIGTERM, puts back the handler it found and raises the signal again.
    # With the default one the process would die there, before its exit handlers (``atexit``)
    # run, and the embedded PostgreSQL (``api.platform.embedded``) would count it as a user
    # forever. This
    # one makes that a normal exit, as Ctrl-C's KeyboardInterrupt is: status 0, handlers run.
    previous = signal.signal(signal.SIGTERM, _exit_normally)
    try:
        configure_logging(settings.log_level, settings.log_format)
        app = app_or_exit(settings)
        check_exposure(settings, app.state.access.enabled)
        uvicorn.run(
            expose_transport(app),  # for dropping a client that stopped reading (api.http.sse)
            host=settings.host,
            port=port if port is not None else settings.port,
            log_level=settings.log_level,
            log_config=uvicorn_log_config(settings.log_format),
            # Open SSE streams would hold shutdown forever; clients reconnect with Last-Event-ID.
            timeout_graceful_shutdown=3,
            # Longer than clients' idle reuse (httpx: 5 s), so a client never sends on a
            # connection the server is closing at that moment.
            timeout_keep_alive=30,
        )
    finally:
        signal.signal(signal.SIGTERM, previous)


def app_or_exit(settings: Settings) -> FastAPI:
    """``create_app``; a ``langgraph.json`` project that cannot start (a missing dependency or
    env file, an import error in its code) exits with one line that says why, no traceback."""
    try:
        return create_app(settings)
    except GraphConfigError as err:
        raise SystemExit(f"threadline: {err}") from None


class QuietServer(uvicorn.Server):
    """uvicorn that leaves the signals alone: Ctrl-C is the terminal's, asyncio cancels the
    CLI's task, and the in-process server is stopped by its caller (uvicorn would take the
    signal and raise it again after its shutdown)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _exit_normally(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings, authenticated: bool) -> None:
    """Without authentication the server binds loopback only, unless the operator insists."""
    if authenticated or is_loopback(settings.host):
        return
    if not settings.insecure_no_auth:
        raise SystemExit(
            f"threadline: refusing to serve on {settings.host} without authentication: anyone "
            "who can reach it could run and approve tools. Set THREADLINE_AUTH=keys (and create "
            "keys with `threadline keys create`), configure a langgraph.json auth module, or "
            "set THREADLINE_INSECURE_NO_AUTH=true to accept the risk."
        )
    logging.getLogger(__name__).warning(
        "serving on %s WITHOUT authentication (THREADLINE_INSECURE_NO_AUTH=true): anyone who "
        "can reach this address can run and approve tools",
        settings.host,
    )


@asynccontextmanager
async def serving_here(settings: Settings) -> AsyncIterator[tuple[str, str]]:
    """The whole service in this process, on a free loopback port; yields its URL and its
    database mode (``embedded`` or ``external``).

    ``threadline run`` without a server uses it, so a terminal run is queued, leased, recorded
    in the audit log and stored as events exactly as a served one (a later ``threadline serve``
    or ``resume`` takes it over if this process dies). Stopping hands running runs back at once:
    a terminal user who presses Ctrl-C wants it stopped.
    """
    app = app_or_exit(settings.model_copy(update={"shutdown_grace_seconds": 0.0}))
    config = uvicorn.Config(
        expose_transport(app),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    server = QuietServer(config)
    task = asyncio.create_task(server.serve(), name="threadline-in-process-server")
    while not server.started:
        if task.done():
            task.result()  # start-up failed: raise its error
            raise RuntimeError("the in-process server stopped during start-up")
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", app.state.service.runtime.database.mode
    finally:
        server.should_exit = True
        await task
