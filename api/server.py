"""``threadline serve``: uvicorn around ``create_app``."""

from __future__ import annotations

import logging
from pathlib import Path

import uvicorn

from api.app import create_app
from api.settings import Settings


def serve(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    config: str | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; shutdown hands running runs back (see ``Workers.stop``)."""
    if config:
        settings = settings.model_copy(update={"config": Path(config)})
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    uvicorn.run(
        app,
        host=host or settings.host,
        port=port if port is not None else settings.port,
        log_level=settings.log_level,
        # Open SSE streams would hold shutdown forever; clients reconnect with Last-Event-ID.
        timeout_graceful_shutdown=3,
        # Longer than clients' idle reuse (httpx: 5 s), so a client never sends on a connection
        # the server is closing at that moment.
        timeout_keep_alive=30,
    )
