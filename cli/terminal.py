"""``threadline run`` / ``resume``: drive a thread to its end on the terminal, answering approvals.

Always through the service's HTTP API: a running server's when one answers at ``THREADLINE_URL``
(default ``http://<host>:<port>``), else the same service started inside this process on a free
loopback port (``api.server.serving_here``). Either way the run is queued, leased, audited and
streamed like any other, and a run this process leaves behind is taken over by the next one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx

from agent.approval import approval_calls, parse_decisions
from api.builtin_agent import BUILTIN_ASSISTANT
from api.platform.serde import to_jsonable
from cli.console import TextStream, render_custom, render_update

MODES = ["updates", "custom", "messages-tuple"]
"""What runs the CLI starts stream: ``messages-tuple`` brings the model's text as it is written."""
SHOWN = {"updates", "custom", "messages", "error", "metadata"}
"""SSE events the terminal shows (``messages-tuple`` arrives as ``messages`` events)."""
RECONNECT_TRIES = 60
"""Reconnects in a row (about two minutes) before the CLI gives up following a run."""


class AnswerRefused(Exception):
    """The server refused an answer to an approval (422): it is still pending."""


class ServerBackend:
    """A threadline server: one already running, or the one this process started."""

    def __init__(self, client: httpx.AsyncClient, thread_id: str) -> None:
        self.client = client
        self.thread_id = thread_id

    async def stream(
        self, first: Any, answers: dict[str, Any] | None
    ) -> AsyncIterator[tuple[str, Any]]:
        run_id = None if answers or first is not None else await self._active_run()
        if run_id is None:
            run_id = await self._create(first, answers)
        async for item in self._follow(run_id):
            yield item

    async def _active_run(self) -> str | None:
        """A resume follows the thread's run if one is still pending or running (taken over)."""
        res = await self.client.get(f"/threads/{self.thread_id}")
        if res.status_code != 200:
            return None
        last = res.json().get("last_run") or {}
        return str(last["run_id"]) if last.get("status") in ("pending", "running") else None

    async def _create(self, first: Any, answers: dict[str, Any] | None) -> str:
        body: dict[str, Any] = {
            "assistant_id": BUILTIN_ASSISTANT,
            "stream_mode": MODES,
            "if_not_exists": "create",
        }
        if answers:
            body["command"] = {"resume": answers}
        else:
            body["input"] = to_jsonable(first)
        res = await self.client.post(f"/threads/{self.thread_id}/runs", json=body)
        if answers and res.status_code == 422:
            raise AnswerRefused(str(res.json().get("detail")))
        if res.status_code >= 400:
            raise SystemExit(f"threadline: the server refused the run: {res.json().get('detail')}")
        return str(res.json()["run_id"])

    async def _follow(self, run_id: str) -> AsyncIterator[tuple[str, Any]]:
        """The run's stream until ``end``, reconnecting with ``Last-Event-ID`` after a drop (the
        server restarting, say): events are stored, so nothing is missed or repeated."""
        last: str | None = None
        failures = 0
        while True:
            headers = {"Last-Event-ID": last} if last else {}
            try:
                async with self.client.stream(
                    "GET", f"/threads/{self.thread_id}/runs/{run_id}/stream", headers=headers
                ) as res:
                    if res.status_code >= 500:
                        raise httpx.TransportError(f"server answered {res.status_code}")
                    if res.status_code >= 400:
                        detail = (await res.aread()).decode()
                        raise SystemExit(f"threadline: cannot follow run {run_id}: {detail}")
                    event = None
                    async for line in res.aiter_lines():
                        if line.startswith("id:"):
                            last = line.partition(":")[2].strip()
                        elif line.startswith("event:"):
                            event = line.partition(":")[2].strip()
                        elif line.startswith("data:") and event:
                            failures = 0
                            data = json.loads(line.partition(":")[2])
                            if event in SHOWN:
                                yield event, data
                            if event == "end":
                                return
            except httpx.TransportError as err:
                failures += 1
                if failures > RECONNECT_TRIES:
                    raise SystemExit(
                        f"threadline: lost the server ({err}); the run goes on there. Follow it "
                        f"again with `threadline resume {self.thread_id}`."
                    ) from None
                print("[connection lost; reconnecting…]", flush=True)
                await asyncio.sleep(min(2.0, 0.25 * failures))

    async def pending(self) -> list[tuple[str, Any]]:
        res = await self.client.get(f"/threads/{self.thread_id}/state")
        res.raise_for_status()
        return [(i["id"], i["value"]) for i in res.json().get("interrupts", [])]

    async def values(self) -> dict[str, Any]:
        res = await self.client.get(f"/threads/{self.thread_id}/state")
        res.raise_for_status()
        return dict(res.json().get("values") or {})


def client_for(url: str) -> httpx.AsyncClient:
    """A client for a threadline server; reads wait as long as a stream runs. It sends
    ``THREADLINE_API_KEY`` as ``x-api-key`` when that is set (a server with keys needs one)."""
    key = os.environ.get("THREADLINE_API_KEY")
    return httpx.AsyncClient(
        base_url=url,
        timeout=httpx.Timeout(10.0, read=None),
        headers={"x-api-key": key} if key else None,
    )


async def find_server(url: str) -> httpx.AsyncClient | None:
    """A client for the server at ``url`` if one answers ``/ok`` there."""
    client = client_for(url)
    try:
        res = await client.get("/ok", timeout=3.0)
        if res.status_code == 200:
            return client
    except httpx.HTTPError:
        pass
    await client.aclose()
    return None


APPROVE: dict[str, Any] = {"type": "approve"}
"""The decision that approves a call (LangChain's human-in-the-loop format)."""


def approve_all(value: dict[str, Any]) -> dict[str, Any]:
    """The answer approving every call an approval request asks about."""
    return {"decisions": [dict(APPROVE) for _ in approval_calls(value)]}


def ask(value: dict[str, Any]) -> dict[str, Any]:
    """Ask on the terminal about each call of the request: approve, edit (new JSON arguments)
    or reject (with a message); the answer holds the decisions in the request's order."""
    calls = approval_calls(value)
    decisions = []
    for index, (name, args) in enumerate(calls):
        description = value["action_requests"][index].get("description")
        decisions.append(ask_one(name, args, description, index, len(calls)))
    return {"decisions": decisions}


def ask_one(
    name: str, args: dict[str, Any], description: str | None, index: int, count: int
) -> dict[str, Any]:
    which = f" ({index + 1}/{count})" if count > 1 else ""
    print(f"\n{name} wants to run with {json.dumps(args)}{which}")
    if description:
        print(f"  ({description})")
    while True:
        answer = input("approve / edit / reject? [a/e/r] ").strip().lower()
        if answer in ("a", "approve"):
            return dict(APPROVE)
        if answer in ("r", "reject"):
            return {"type": "reject", "message": input("message for the agent: ")}
        if answer in ("e", "edit"):
            try:
                action = {"name": name, "args": json.loads(input("new args (JSON): "))}
                edited = {"type": "edit", "edited_action": action}
                # The shape is checked here; the arguments against the tool's schema by the
                # server (422, which uses nothing up: the call is asked about again).
                parse_decisions({"decisions": [edited]}, [None], [name])
                return edited
            except json.JSONDecodeError as err:
                print(f"not JSON: {err}")
            except ValueError as err:
                print(f"not valid: {err}")


def render_event(mode: str, data: Any, streamed: set[str]) -> list[str]:
    """Terminal lines for one event other than a text chunk."""
    if mode == "custom":
        line = render_custom(data)
        return [line] if line else []
    if mode == "error":
        return [f"[error] {data.get('message') if isinstance(data, dict) else data}"]
    if mode == "metadata":
        attempt = data.get("attempt", 1) if isinstance(data, dict) else 1
        return [f"[resumed: attempt {attempt}]"] if attempt > 1 else []
    return render_update(data, streamed)


async def drive(backend: ServerBackend, thread_id: str, first: Any, *, auto_approve: bool) -> int:
    """Stream the thread to the terminal until it ends; returns the exit code."""
    answers: dict[str, Any] | None = None
    text = TextStream()
    while True:
        try:
            async for mode, data in backend.stream(first, answers):
                if mode == "messages":
                    sys.stdout.write(text.chunk(data))
                    sys.stdout.flush()
                    continue
                lines = render_event(mode, data, text.streamed)
                if lines or mode == "updates":
                    sys.stdout.write(text.close())
                for line in lines:
                    print(line, flush=True)
        except AnswerRefused as err:
            print(f"not valid: {err}", flush=True)
            answers = {iid: ask(value) for iid, value in await backend.pending()}
            continue
        pending = await backend.pending()
        if not pending:
            break
        if not auto_approve and not sys.stdin.isatty():
            print(
                f"\nthread {thread_id} waits for approval of {len(pending)} call(s). "
                f"Answer with `threadline resume {thread_id} --auto-approve`, on a terminal with "
                f"`threadline resume {thread_id}`, or through the API "
                f"(POST /threads/{thread_id}/approvals)."
            )
            return 3
        answers = {
            iid: approve_all(value) if auto_approve else ask(value) for iid, value in pending
        }
    values = await backend.values()
    status = values.get("status")
    verdict = values.get("verdict") or {}
    check = f" · check: {verdict.get('output', '').strip()}" if verdict else ""
    print(f"\nstatus: {status}{check}")
    print(f"thread: {thread_id}")
    return 0 if status in ("verified", "agent_done") else 1
