"""The cheapest server here: a few lines of Starlette under uvicorn with the service's settings.

``GET /ok`` answers ``{}`` (an HTTP round trip and nothing else); ``POST /sse`` streams a run's
events with sse-starlette's ``EventSourceResponse`` as the service does (``sep="\\n"``): the
events in the JSON file ``$BENCH_BARE_EVENTS`` (``[{"event", "data", "id"}, ...]``, a real run's
stream captured by ``bench.request_floor``), else ``EVENTS`` small ones. It takes the service's
command line (``serve --port N``) so :class:`bench.service.Server` starts and stops it
(``module="bench.bare_app"``), and runs under ``uvicorn.run`` with the settings
``api.server.serve`` passes: the default loop and HTTP implementations (uvloop and httptools
when installed, as here), log level ``warning``, keep-alive 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench import nowork

EVENTS = nowork.EVENTS + 2
"""A service run's stream on the no-work graph: ``metadata``, the graph's 19 events, ``end``."""
EVENTS_ENV = "BENCH_BARE_EVENTS"


def synthetic_events(count: int = EVENTS) -> list[dict[str, str]]:
    """``count`` small events shaped like a run's: ``metadata``, ``updates``..., ``end``."""
    body = json.dumps({"agent": {"round": 1}})
    names = ["metadata", *["updates"] * (count - 2), "end"]
    return [{"event": name, "data": body, "id": str(i)} for i, name in enumerate(names)]


def load_events() -> list[dict[str, str]]:
    path = os.environ.get(EVENTS_ENV)
    if not path:
        return synthetic_events()
    with open(path) as f:
        return list(json.load(f))


def app(events: list[dict[str, str]]) -> Starlette:
    async def ok(request: Request) -> JSONResponse:
        return JSONResponse({})

    async def sse(request: Request) -> EventSourceResponse:
        await request.body()  # the client sends a run's body; read it as the service does

        async def stream() -> AsyncIterator[ServerSentEvent]:
            for e in events:
                yield ServerSentEvent(data=e["data"], event=e["event"], id=e.get("id") or None)

        return EventSourceResponse(stream(), sep="\n")

    return Starlette(routes=[Route("/ok", ok), Route("/sse", sse, methods=["POST"])])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bare_app")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": args.port,
        "log_level": "warning",
        "timeout_graceful_shutdown": 3,
        "timeout_keep_alive": 30,
    }
    uvicorn.run(app(load_events()), **options)


if __name__ == "__main__":
    main()
