"""A real HTTP receiver of webhooks for tests: ``http.server`` in a thread on 127.0.0.1, recording
every POST (path, headers, JSON body) and answering what a test scripted for its path."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Receiver:
    """What :func:`receiving` serves: ``script[path]`` lists the answers to give there in turn
    (a status, or ``(status, location)``), then 200; ``delay`` seconds before each answer."""

    port: int
    script: dict[str, list[int | tuple[int, str]]] = field(default_factory=dict)
    delay: float = 0.0
    posts: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def bodies(self, which: Callable[[Any], bool]) -> list[Any]:
        """The bodies POSTed so far that ``which`` selects."""
        with self.lock:
            return [p.body for p in self.posts if which(p.body)]

    def for_run(self, run_id: str) -> list[Any]:
        """The bodies POSTed about a run."""
        return self.bodies(lambda body: body.get("run_id") == run_id)

    def answer(self, path: str) -> int | tuple[int, str]:
        with self.lock:
            planned = self.script.get(path)
            return planned.pop(0) if planned else 200

    def record(self, received: Received) -> None:
        with self.lock:
            self.posts.append(received)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            receiver.record(Received(self.path, headers, json.loads(raw)))
            if receiver.delay:
                time.sleep(receiver.delay)
            answer = receiver.answer(self.path)
            status, location = answer if isinstance(answer, tuple) else (answer, None)
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def receiving(port: int = 0, *, delay: float = 0.0) -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (``port``: a chosen one, else any free one) until the
    block ends."""
    receiver = Receiver(port=port, delay=delay)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(receiver))
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


async def eventually(condition: Callable[[], Any], timeout: float = 30.0, why: str = "") -> Any:
    """Poll ``condition`` (sync or async) until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, why or "condition never held"
        await asyncio.sleep(0.1)
