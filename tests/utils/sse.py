"""Reading a run's event stream as a client does.

- :func:`read_sse` parses a raw SSE response into :class:`SSEEvent` tuples (comments included).
- :class:`StreamFollower` reads one run's stream to its ``end`` the way a browser's
  ``EventSource`` does: on any drop it reconnects (to the same or another replica) with
  ``Last-Event-ID``, and keeps every event it received, duplicates included, so a check can tell
  "each event exactly once" from "at least once".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx

from tests.utils.server import ServerProcess, api_headers


class SSEEvent(NamedTuple):
    """One SSE frame: ``id``, ``event``, ``data`` (decoded when it is JSON); or a comment."""

    id: str | None
    event: str | None
    data: Any
    comment: str | None = None

    @property
    def is_comment(self) -> bool:
        return self.comment is not None

    @property
    def seq(self) -> int | None:
        try:
            return int(self.id) if self.id is not None else None
        except ValueError:
            return None


def _decode(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return data


async def read_sse(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """The frames of a streaming ``httpx`` response, in order; comments as their own items."""
    event_id: str | None = None
    event: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        line = line.rstrip("\r\n")
        if not line:
            if data or event is not None or event_id is not None:
                yield SSEEvent(event_id, event or "message", _decode("\n".join(data)))
            event_id, event, data = None, None, []
            continue
        if line.startswith(":"):
            yield SSEEvent(None, None, None, comment=line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            event_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)
        # "retry" and unknown fields are ignored, as EventSource does.
    if data or event is not None:
        yield SSEEvent(event_id, event or "message", _decode("\n".join(data)))


def _url(target: ServerProcess | str) -> str | None:
    if isinstance(target, ServerProcess):
        return target.url if target.running else None
    return target


@dataclass
class StreamFollower:
    """Reads a run's join stream until ``end``, reconnecting with ``Last-Event-ID`` on any drop.

    ``targets`` are servers (skipped while not running) or base URLs; after a drop the follower
    tries them in turn from the next one, so with replicas it also fails over.
    """

    thread_id: str
    run_id: str
    last_event_id: int | None = None
    """Resume after this id; None starts from the first event (sends ``Last-Event-ID: -1``)."""
    stream_mode: Sequence[str] | None = None
    events: list[SSEEvent] = field(default_factory=list)
    connections: int = 0
    ended: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def path(self) -> str:
        return f"/threads/{self.thread_id}/runs/{self.run_id}/stream"

    async def follow(
        self,
        targets: Sequence[ServerProcess | str],
        *,
        timeout: float = 120.0,
        retry_delay: float = 0.1,
    ) -> list[SSEEvent]:
        """Read until the ``end`` event (TimeoutError after ``timeout``); returns ``events``."""
        async with asyncio.timeout(timeout):
            current = 0
            params = {"stream_mode": list(self.stream_mode)} if self.stream_mode else None
            async with httpx.AsyncClient(
                timeout=httpx.Timeout(10.0, read=30.0), headers=api_headers()
            ) as client:
                while not self.ended:
                    url = _url(targets[current])
                    if url is not None:
                        last = "-1" if self.last_event_id is None else str(self.last_event_id)
                        # The server died or dropped us: reconnect.
                        with contextlib.suppress(httpx.TransportError):
                            await self._read_once(client, url, last, params)
                    if not self.ended:
                        current = (current + 1) % len(targets)
                        await asyncio.sleep(retry_delay)
        return self.events

    async def _read_once(self, client: httpx.AsyncClient, url: str, last: str, params: Any) -> None:
        async with client.stream(
            "GET", url + self.path, headers={"Last-Event-ID": last}, params=params
        ) as response:
            if response.status_code == 503:  # the database is down: retry as told
                await asyncio.sleep(float(response.headers.get("Retry-After") or 1))
                return
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                raise AssertionError(
                    f"GET {url}{self.path} answered {response.status_code}: {body}"
                )
            self.connections += 1
            async for frame in read_sse(response):
                self._take(frame)
                if self.ended:
                    return

    def _take(self, frame: SSEEvent) -> None:
        if frame.is_comment:  # a heartbeat
            return
        self.events.append(frame)
        if frame.seq is not None:
            self.last_event_id = frame.seq
        if frame.event == "end":
            self.ended = True
        self.changed.set()
