"""AG-UI 1.0 at ``/ag-ui/{assistant_id}`` (``api.http.ag_ui``) against real servers, with httpx.

Every event received is validated with the official ``ag_ui.core`` models. Covered: a run's
translation (text deltas, steps, state snapshot and JSON-Patch deltas that rebuild the thread's
state, messages snapshot, frame ids = stored positions); a model's fragmented tool-call
arguments (a scripted OpenAI-compatible server); approvals answered over AG-UI (also one raised
by a LangGraph API run), exactly once and audited ``via: ag-ui``; continuing a stream (the same
``runId`` with ``Last-Event-ID``, the GET form) and after a SIGKILL of the server mid-run;
hostile input; tenancy.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.utils.db import create_database, drop_database
from tests.utils.fake_openai import FakeOpenAIServer, Reply, ToolCall
from tests.utils.keys import create_key
from tests.utils.server import ServerProcess
from tests.utils.tasks import greet

pytestmark = pytest.mark.timeout(120)

EVENT = TypeAdapter(Event)
GREET = (
    'Write the line \'Hello, Ada!\' to greeting.txt.\n\n(threadline task: greet {"name": "Ada"})'
)
APPROVE = {"decisions": [{"type": "approve"}]}
Frame = tuple[str | None, dict[str, Any]]
"""A frame's ``id`` (``<seq>`` or ``<seq>.<part>``; None for a continuation's re-opening
events) and its event."""


@contextmanager
def database(admin_url: str) -> Iterator[str]:
    """A new database on the test PostgreSQL, dropped afterwards."""
    url = create_database(admin_url)
    try:
        yield url
    finally:
        drop_database(admin_url, url)


def body(thread_id: str, run_id: str | None = None, *messages: str, **more: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id or str(uuid.uuid4()),
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": m} for m in messages],
        **more,
    }


async def read_frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """``(id, event)`` per SSE frame; each event validated by ag_ui's own models."""
    position: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            position = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            event = json.loads("\n".join(data))
            EVENT.validate_python(event)
            if position is not None:  # the event says where it is, as its frame does
                assert event["rawEvent"]["threadline"]["event_id"] == position, event
            yield position, event
            position, data = None, []


def order(position: str | None) -> tuple[int, int]:
    assert position is not None
    seq, _, part = position.partition(".")
    return int(seq), int(part or 0)


def assert_valid(frames: list[Frame]) -> None:
    """What the official client checks of a stream: RUN_STARTED first, RUN_FINISHED last and
    once, nothing continued or ended that this stream did not start."""
    assert frames and frames[0][1]["type"] == "RUN_STARTED", types(frames)
    opened: set[tuple[str, str]] = set()
    for _, event in frames[1:]:
        kind = event["type"]
        key = {
            "STEP": ("step", event.get("stepName")),
            "TEXT_MESSAGE": ("text", event.get("messageId")),
            "TOOL_CALL": ("call", event.get("toolCallId")),
        }
        for prefix, item in key.items():
            if kind == f"{prefix}_STARTED" or kind == f"{prefix}_START":
                assert item not in opened, (kind, item)
                opened.add(item)  # type: ignore[arg-type]
            elif kind in (f"{prefix}_CONTENT", f"{prefix}_ARGS"):
                assert item in opened, (kind, item)
            elif kind in (f"{prefix}_FINISHED", f"{prefix}_END"):
                assert item in opened, (kind, item)
                opened.discard(item)  # type: ignore[arg-type]
    assert types(frames).count("RUN_STARTED") == 1, types(frames)


def continued(frames: list[Frame]) -> tuple[list[Frame], list[Frame]]:
    """A continuation split into its re-opening events (no id) and the rest."""
    opening = 0
    while opening < len(frames) and frames[opening][0] is None:
        opening += 1
    assert all(position is not None for position, _ in frames[opening:]), frames
    return frames[:opening], frames[opening:]


async def run(
    http: httpx.AsyncClient, payload: Any, headers: dict[str, str] | None = None
) -> list[Frame]:
    async with http.stream("POST", "/ag-ui/agent", json=payload, headers=headers) as response:
        if response.status_code != 200:
            raise AssertionError(f"{response.status_code}: {(await response.aread()).decode()}")
        assert response.headers["content-type"].startswith("text/event-stream")
        return [f async for f in read_frames(response)]


async def refused(
    http: httpx.AsyncClient, payload: Any, status: int, *words: str, **kw: Any
) -> str:
    response = await http.post("/ag-ui/agent", **({"json": payload} | kw))
    assert response.status_code == status, response.text
    detail: str = response.json()["detail"]
    for word in words:
        assert word in detail, detail
    return detail


def types(frames: list[Frame]) -> list[str]:
    return [event["type"] for _, event in frames]


def finished(frames: list[Frame]) -> dict[str, Any]:
    assert types(frames).count("RUN_FINISHED") == 1, types(frames)
    assert frames[-1][1]["type"] == "RUN_FINISHED", types(frames)
    return frames[-1][1]


async def test_a_run_translated(http: httpx.AsyncClient) -> None:
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    frames = await run(http, body(thread_id, run_id, "hello"))
    kinds = types(frames)
    runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    assert frames[0][1] == {
        "type": "RUN_STARTED",
        "threadId": thread_id,
        "runId": run_id,
        "protocolVersion": "1.0",
        "rawEvent": {"threadline": {"event_id": "1", "run_id": runs[0]["run_id"]}},
    }
    assert finished(frames)["outcome"] == {"type": "success"}
    assert kinds.count("STATE_SNAPSHOT") == 1 and kinds.count("MESSAGES_SNAPSHOT") == 1
    assert kinds.index("STEP_STARTED") < kinds.index("TEXT_MESSAGE_START")
    assert kinds.index("TEXT_MESSAGE_END") < kinds.index("STEP_FINISHED")
    # The text arrives as the model streams it, and is the message the thread holds.
    deltas = [e["delta"] for _, e in frames if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert len(deltas) > 5
    state = (await http.get(f"/threads/{thread_id}/state")).json()["values"]
    assert "".join(deltas) == state["messages"][-1]["content"]
    snapshot = next(e for _, e in frames if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert [(m["role"], m["content"]) for m in snapshot] == [
        ("user", "hello"),
        ("assistant", "".join(deltas)),
    ]
    # The snapshot and the JSON Patches rebuild the thread's state (without its messages).
    built: Any = None
    for _, event in frames:
        if event["type"] == "STATE_SNAPSHOT":
            built = event["snapshot"]
        elif event["type"] == "STATE_DELTA":
            built = jsonpatch.apply_patch(built, event["delta"])
    assert built == {k: v for k, v in state.items() if k != "messages"}
    # Frame ids are the stored events' positions, in order; RUN_FINISHED comes from ``end``.
    assert_valid(frames)
    runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    assert [r["metadata"] for r in runs] == [{"ag_ui": {"run_id": run_id}}]
    ids = [order(position) for position, _ in frames]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) and ids[0][0] == 1
    assert any(position and "." in position for position, _ in frames)  # several from one event
    stored = await stored_events(http, thread_id, runs[0]["run_id"])
    assert stored[ids[-1][0]] == "end" and max(stored) == ids[-1][0]


async def stored_events(http: httpx.AsyncClient, thread_id: str, run_id: str) -> dict[int, str]:
    """The run's stored events (id → name), through the LangGraph API's stream."""
    found: dict[int, str] = {}
    url = f"/threads/{thread_id}/runs/{run_id}/stream"
    async with http.stream("GET", url, headers={"Last-Event-ID": "-1"}) as response:
        seq = None
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                seq = int(line[3:])
            elif line.startswith("event:") and seq is not None:
                found[seq] = line[6:].strip()
    return found


async def test_the_same_run_id_continues_its_stream(http: httpx.AsyncClient) -> None:
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    payload = body(thread_id, run_id, "hello")
    first = await run(http, payload)
    # Sent again: the same stream, no second run; with Last-Event-ID: what came after it.
    assert await run(http, payload) == first
    # With Last-Event-ID, from any frame: what came after it, behind the events that re-open
    # what was open there (a stream the official client accepts on its own).
    for i, (position, _) in enumerate(first):
        assert position is not None
        after = await run(http, payload, {"Last-Event-ID": position})
        opening, rest = continued(after)
        assert rest == first[i + 1 :], position
        if rest:
            assert opening[0][1]["type"] == "RUN_STARTED"
            assert_valid(after)
        else:
            assert opening == []  # saw the end: nothing more
    middle = first[len(first) // 2][0]
    assert middle is not None
    after = await run(http, payload, {"Last-Event-ID": middle})
    assert len((await http.get(f"/threads/{thread_id}/runs")).json()) == 1
    # The GET form, for EventSource (the header, or a query parameter).
    url = f"/ag-ui/agent/threads/{thread_id}/runs/{run_id}/stream"
    async with http.stream("GET", url, params={"last_event_id": middle}) as response:
        assert response.status_code == 200
        assert [f async for f in read_frames(response)] == after
    # Hostile reconnects.
    await refused(
        http, payload, 422, "past this run's last event", headers={"Last-Event-ID": "999999"}
    )
    for bad in ("x", "0.1", "3.", "3.x", "-1.0"):
        await refused(http, payload, 422, "Last-Event-ID", headers={"Last-Event-ID": bad})
    other = body(thread_id, "never-started", "hi")
    await refused(http, other, 404, "never-started", headers={"Last-Event-ID": "3"})
    missing = await http.get(f"/ag-ui/agent/threads/{thread_id}/runs/never-started/stream")
    assert missing.status_code == 404, missing.text


async def test_approvals_over_ag_ui(http: httpx.AsyncClient) -> None:
    thread_id = str(uuid.uuid4())
    frames = await run(http, body(thread_id, None, GREET))
    outcome = finished(frames)["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    call = next(e for _, e in frames if e["type"] == "TOOL_CALL_START")
    assert interrupt["reason"] == "tool_approval" and interrupt["toolCallId"] == call["toolCallId"]
    assert interrupt["metadata"]["value"]["action_requests"][0]["name"] == "write_file"
    assert "decisions" in interrupt["responseSchema"]["properties"]
    state = next(e for _, e in frames if e["type"] == "STATE_SNAPSHOT")
    assert "__interrupt__" not in state["snapshot"]

    answer = [{"interruptId": interrupt["id"], "status": "resolved", "payload": APPROVE}]
    resumed = await run(http, body(thread_id, None, resume=answer))
    assert finished(resumed)["outcome"] == {"type": "success"}
    result = next(e for _, e in resumed if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == call["toolCallId"] and result["role"] == "tool"
    # Exactly once: the same answer again is a conflict; the audit log says it came over AG-UI.
    await refused(http, body(thread_id, None, resume=answer), 409, interrupt["id"])
    audit = (await http.get(f"/threads/{thread_id}/audit")).json()
    decisions = [e["detail"] for e in audit if e["kind"] == "decision"]
    assert decisions == [{"interrupt_id": interrupt["id"], "answer": APPROVE, "via": "ag-ui"}]

    # An interrupt raised by a run of the LangGraph API, cancelled over AG-UI: rejected.
    other = (await http.post("/threads", json={})).json()["thread_id"]
    waited = await http.post(
        f"/threads/{other}/runs/wait", json={"assistant_id": "agent", "input": greet()}
    )
    (pending,) = waited.json()["__interrupt__"]
    unknown = [{"interruptId": "f" * 32, "status": "resolved", "payload": APPROVE}]
    await refused(http, body(other, None, resume=unknown), 409, "not pending", pending["id"])
    cancel = [{"interruptId": pending["id"], "status": "cancelled"}]
    rejected = await run(http, body(other, None, resume=cancel))
    assert finished(rejected)["outcome"] == {"type": "success"}
    tool = next(e for _, e in rejected if e["type"] == "TOOL_CALL_RESULT")
    assert "cancelled" in tool["content"]
    audit = (await http.get(f"/threads/{other}/audit")).json()
    (decision,) = [e["detail"] for e in audit if e["kind"] == "decision"]
    assert decision["via"] == "ag-ui" and decision["answer"]["decisions"][0]["type"] == "reject"
    # Nothing pending any more.
    await refused(http, body(other, None, resume=cancel), 409, "no pending interrupt")


async def test_hostile_input(http: httpx.AsyncClient) -> None:
    thread_id = str(uuid.uuid4())
    good = body(thread_id, None, "hello")
    bad_json = await http.post(
        "/ag-ui/agent", content=b'{"threadId": ', headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 422 and "JSON" in bad_json.json()["detail"], bad_json.text
    await refused(http, {"threadId": 5, "runId": "r", "messages": "x"}, 422, "threadId", "messages")
    await refused(http, {"threadId": "t", "runId": "r"}, 422, "messages")
    await refused(http, [1, 2], 422)
    await refused(http, {**good, "threadID": "x"}, 422, "threadID")
    await refused(http, {**good, "threadId": "a b"}, 422, "threadId")
    await refused(http, {**good, "protocolVersion": "2.0"}, 422, "1.0")
    tool = {"name": "search", "description": "Search the web."}
    await refused(http, {**good, "tools": [tool]}, 422, "tools", "search")
    context = [{"description": "user", "value": "Ada"}]
    await refused(http, {**good, "context": context}, 422, "context")
    await refused(http, {**good, "forwardedProps": {"command": {}}}, 422, "forwardedProps")
    image = {"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}
    pictured = {**good, "messages": [{"id": "m1", "role": "user", "content": [image]}]}
    await refused(http, pictured, 422, "image")
    reasoning = {**good, "messages": [{"id": "m1", "role": "reasoning", "content": "hm"}]}
    await refused(http, reasoning, 422, "reasoning")
    bad_args = {
        "id": "m1",
        "role": "assistant",
        "toolCalls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}],
    }
    await refused(http, {**good, "messages": [bad_args]}, 422, "not JSON")
    await refused(http, {**good, "state": {"status": "done"}}, 409, "status")
    nothing = {"interruptId": "f" * 32, "status": "resolved", "payload": APPROVE}
    await refused(http, {**good, "messages": [], "resume": [nothing]}, 404, "No thread")
    assert (await http.post("/ag-ui/no-such-assistant", json=good)).status_code == 404
    # A finished run's messages sent again (no new one): nothing to run.
    await run(http, good)
    again = {**good, "runId": str(uuid.uuid4())}
    await refused(http, again, 422, "Nothing to run")
    # A resume when nothing is pending; one that also sends a new message.
    await refused(http, {**again, "resume": [nothing]}, 409, "no pending interrupt")
    both = body(thread_id, None, "and this", resume=[nothing])
    await refused(http, both, 422, "either resume or new messages")


async def test_fragmented_tool_calls(
    make_server: Callable[..., ServerProcess], pg_admin_url: str, tmp_path: Path
) -> None:
    """A model (a scripted OpenAI-compatible server) streams a tool call's arguments in
    fragments (later chunks name the call by index only), then its answer word by word."""
    answer = "The workspace is empty, nothing to report."
    replies = [
        Reply(content="Looking first.", tool_calls=(ToolCall("list_files", {"path": "."}),)),
        Reply(content=answer),
    ]
    with FakeOpenAIServer(replies) as model, database(pg_admin_url) as url:
        env = {"OPENAI_API_KEY": model.api_key, "OPENAI_BASE_URL": model.base_url}
        proc = make_server(url, tmp_path, env=env).start()
        try:
            async with httpx.AsyncClient(base_url=proc.url, timeout=60) as http:
                frames = await run(http, body(str(uuid.uuid4()), None, "what is there?"))
        finally:
            proc.stop()
    assert finished(frames)["outcome"] == {"type": "success"}
    (start,) = [e for _, e in frames if e["type"] == "TOOL_CALL_START"]
    args = [e["delta"] for _, e in frames if e["type"] == "TOOL_CALL_ARGS"]
    assert start["toolCallName"] == "list_files" and len(args) > 1
    assert json.loads("".join(args)) == {"path": "."}
    kinds = types(frames)
    assert kinds.index("TOOL_CALL_END") < kinds.index("TOOL_CALL_RESULT")
    texts: dict[str, str] = {}
    for _, event in frames:
        if event["type"] == "TEXT_MESSAGE_CONTENT":
            texts[event["messageId"]] = texts.get(event["messageId"], "") + event["delta"]
    assert list(texts.values()) == ["Looking first.", answer]
    assert kinds.count("TEXT_MESSAGE_START") == kinds.count("TEXT_MESSAGE_END") == 2


@pytest.fixture
def keys_server(
    make_server: Callable[..., ServerProcess], pg_admin_url: str, tmp_path: Path
) -> Iterator[ServerProcess]:
    with database(pg_admin_url) as url:
        proc = make_server(url, tmp_path, env={"THREADLINE_AUTH": "keys"})
        try:
            yield proc.start()
        finally:
            proc.stop()


async def test_tenancy(keys_server: ServerProcess, tmp_path: Path) -> None:
    url = keys_server.env["DATABASE_URL"]
    alice = {"x-api-key": create_key(tmp_path, url, "alice")}
    bob = {"x-api-key": create_key(tmp_path, url, "bob")}
    async with httpx.AsyncClient(base_url=keys_server.url, timeout=60) as http:
        thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
        assert (
            await http.post("/ag-ui/agent", json=body(thread_id, run_id, "hi"))
        ).status_code == 401
        frames = await run(http, body(thread_id, run_id, GREET), alice)
        (interrupt,) = finished(frames)["outcome"]["interrupts"]
        # Bob sees none of it: a new run, alice's run id (to reconnect), her interrupt: 404.
        await refused(http, body(thread_id, None, "mine now"), 404, headers=bob)
        await refused(http, body(thread_id, run_id, GREET), 404, headers=bob)
        await refused(
            http, body(thread_id, run_id, GREET), 404, headers={**bob, "Last-Event-ID": "2"}
        )
        answer = [{"interruptId": interrupt["id"], "status": "resolved", "payload": APPROVE}]
        await refused(http, body(thread_id, None, resume=answer), 404, headers=bob)
        stream = f"/ag-ui/agent/threads/{thread_id}/runs/{run_id}/stream"
        assert (await http.get(stream, headers=bob)).status_code == 404
        resumed = await run(http, body(thread_id, None, resume=answer), alice)
        assert finished(resumed)["outcome"] == {"type": "success"}


async def test_a_stream_continues_after_a_crash(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """SIGKILL the server mid-run; restarted, it takes the run over; the client continues from
    the last id it saw: the rest arrives, nothing lost or repeated, RUN_FINISHED once."""
    env = {"THREADLINE_APPROVAL_POLICY": '{"*": "auto"}'}
    proc = make_server(database_url, tmp_path, env=env).start()
    count = '(threadline task: counter {"n": 6, "delay": 0.4})'
    payload = body(str(uuid.uuid4()), None, f"Count to six.\n\n{count}")
    seen: list[Frame] = []
    async with httpx.AsyncClient(base_url=proc.url, timeout=60) as http:
        with pytest.raises(httpx.HTTPError):
            async with http.stream("POST", "/ag-ui/agent", json=payload) as response:
                async for frame in read_frames(response):
                    seen.append(frame)
                    if types(seen).count("TOOL_CALL_RESULT") == 2 and proc.running:
                        proc.kill()
    assert "RUN_FINISHED" not in types(seen)
    proc.start()
    async with httpx.AsyncClient(base_url=proc.url, timeout=60) as http:
        last = seen[-1][0]
        assert last is not None
        after = await run(http, payload, {"Last-Event-ID": last})
        url = f"/ag-ui/agent/threads/{payload['threadId']}/runs/{payload['runId']}/stream"
        async with http.stream("GET", url) as response:
            whole = [f async for f in read_frames(response)]
        (taken_over,) = (await http.get(f"/threads/{payload['threadId']}/runs")).json()
    assert taken_over["attempt"] >= 2  # the restarted server continued the run
    _, rest = continued(after)
    assert seen + rest == whole
    assert_valid(whole)
    assert_valid(after)
    assert finished(whole)["outcome"] == {"type": "success"}
    assert types(whole).count("TOOL_CALL_RESULT") == 6
    assert order(rest[0][0]) > order(last)
