"""The runs calls of LangGraph Server's API the SDKs make, through the official Python SDK and
plain HTTP: deleting a run, threadless runs, breakpoints (``interrupt_before`` /
``interrupt_after``), ``multitask_strategy`` ``interrupt`` and ``rollback``, and the
``messages`` / ``events`` stream modes. Hostile input gets a 4xx that says what to do.

The module's server requires built-in API keys: two tenants, alice and bob.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.utils.keys import create_key
from tests.utils.runs import MODES, collect
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter

SERVER_ENV = {"THREADLINE_AUTH": "keys", "THREADLINE_THREADLESS_GRACE_SECONDS": "1"}
QUICK = counter(2, 0)
SLOW = counter(3, 30)


@pytest.fixture(scope="module")
def keys(server: ServerProcess, module_database_url: str, module_data_dir: Path) -> dict[str, str]:
    return {who: create_key(module_data_dir, module_database_url, who) for who in ("alice", "bob")}


@pytest.fixture
async def alice(server: ServerProcess, keys: dict[str, str]) -> AsyncIterator[Any]:
    async with get_client(url=server.url, api_key=keys["alice"]) as c:
        yield c


@pytest.fixture
async def bob(server: ServerProcess, keys: dict[str, str]) -> AsyncIterator[Any]:
    async with get_client(url=server.url, api_key=keys["bob"]) as c:
        yield c


@pytest.fixture
async def raw(server: ServerProcess, keys: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=server.url,
        headers={"x-api-key": keys["alice"]},
        timeout=httpx.Timeout(10.0, read=60.0),
    ) as c:
        yield c


async def started(client: Any, tid: str, run_id: str) -> None:
    """Return once the run's first tool call started (it is running, mid-step)."""
    async for part in client.runs.join_stream(tid, run_id, stream_mode=MODES):
        if part.event == "custom" and part.data.get("type") == "tool_started":
            return
    raise AssertionError("the run ended before its first tool call")


async def status_of(client: Any, tid: str, run_id: str, want: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (got := (await client.runs.get(tid, run_id))["status"]) != want:
        assert time.monotonic() < deadline, f"run {run_id} is {got}, not {want}"
        await asyncio.sleep(0.2)


# -- DELETE /threads/{id}/runs/{run_id} --------------------------------------------------------


async def test_delete_a_finished_run_and_refuse_an_active_one(alice: Any, bob: Any) -> None:
    tid = (await alice.threads.create())["thread_id"]
    done = await alice.runs.create(tid, "agent", input=QUICK)
    await alice.runs.join(tid, done["run_id"])
    # Another tenant's run is not found, and stays.
    with pytest.raises(NotFoundError):
        await bob.runs.delete(tid, done["run_id"])
    assert (await alice.runs.get(tid, done["run_id"]))["status"] == "success"
    await alice.runs.delete(tid, done["run_id"])
    with pytest.raises(NotFoundError):
        await alice.runs.get(tid, done["run_id"])
    assert done["run_id"] not in [r["run_id"] for r in await alice.runs.list(tid)]
    with pytest.raises(NotFoundError):
        await alice.runs.delete(tid, done["run_id"])
    # The thread's state is the thread's: it stays.
    assert (await alice.threads.get_state(tid))["values"]["status"] == "verified"

    active = await alice.runs.create(tid, "agent", input=SLOW, stream_mode=MODES)
    with pytest.raises(ConflictError) as err:
        await alice.runs.delete(tid, active["run_id"])
    assert "cancel it first" in err.value.response.text
    await alice.runs.cancel(tid, active["run_id"])
    await status_of(alice, tid, active["run_id"], "interrupted")
    await alice.runs.delete(tid, active["run_id"])


async def test_delete_run_hostile_ids(raw: httpx.AsyncClient) -> None:
    tid = (await raw.post("/threads", json={})).json()["thread_id"]
    for path in (f"/threads/{tid}/runs/not-a-uuid", f"/threads/{tid}/runs/{'9' * 5000}"):
        got = await raw.delete(path)
        assert got.status_code in (404, 422), got.text
    got = await raw.delete(f"/threads/{tid}/runs/00000000-0000-0000-0000-000000000000")
    assert got.status_code == 404


# -- threadless runs ---------------------------------------------------------------------------


async def test_threadless_wait_returns_values_and_the_thread_goes(alice: Any) -> None:
    created: list[Any] = []
    values = await alice.runs.wait(None, "agent", input=QUICK, on_run_created=created.append)
    assert values["status"] == "verified"
    tid = created[0]["thread_id"]
    deadline = time.monotonic() + 20
    while True:  # removed after the grace (1 s here) by the workers' sweep
        try:
            await alice.threads.get(tid)
        except NotFoundError:
            break
        assert time.monotonic() < deadline, "the threadless run's thread was not removed"
        await asyncio.sleep(0.5)


async def test_threadless_stream_and_keep(
    alice: Any, bob: Any, raw: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    meta: list[Any] = []
    parts = await collect(
        alice.runs.stream(
            None,
            "agent",
            input=QUICK,
            stream_mode=MODES,
            on_completion="keep",
            on_run_created=meta.append,
        )
    )
    assert parts[0].event == "metadata" and parts[-1].event == "end"
    assert parts[-1].data["status"] == "success"
    tid, run_id = meta[0]["thread_id"], meta[0]["run_id"]
    await asyncio.sleep(3)  # past the grace: kept all the same
    thread = await alice.threads.get(tid)
    assert thread["status"] == "idle"
    with pytest.raises(NotFoundError):
        await bob.threads.get(tid)  # the caller's thread
    # Joined by the run id alone, as the JS SDK's joinStream(null, runId) does.
    got = await raw.get(f"/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"})
    assert got.status_code == 200 and "event: end" in got.text
    as_bob = {"x-api-key": keys["bob"]}
    got = await raw.get(f"/runs/{run_id}/stream", headers=as_bob)
    assert got.status_code == 404 and tid not in got.text
    assert (await raw.get("/runs/not-a-run/stream")).status_code in (404, 422)


async def test_threadless_background_run(alice: Any) -> None:
    run = await alice.runs.create(None, "agent", input=QUICK, on_completion="keep")
    assert run["status"] == "pending"
    assert (await alice.runs.join(run["thread_id"], run["run_id"]))["status"] == "verified"


async def test_threadless_refuses_a_resume_or_a_checkpoint(raw: httpx.AsyncClient) -> None:
    for extra in ({"command": {"resume": "yes"}}, {"checkpoint_id": "abc"}):
        got = await raw.post("/runs", json={"assistant_id": "agent", **extra})
        assert got.status_code == 422, got.text
        assert "new thread" in got.text
    got = await raw.post("/runs/wait", json={"assistant_id": "agent", "on_completion": "maybe"})
    assert got.status_code == 422


# -- breakpoints -------------------------------------------------------------------------------


async def test_interrupt_before_pauses_and_a_null_input_continues(alice: Any) -> None:
    tid = (await alice.threads.create())["thread_id"]
    run = await alice.runs.create(tid, "agent", input=QUICK, interrupt_before=["tools"])
    await alice.runs.join(tid, run["run_id"])
    state = await alice.threads.get_state(tid)
    assert state["next"] == ["tools"]
    assert (await alice.threads.get(tid))["status"] == "interrupted"
    # Paused at the breakpoint: the run ends success, as on LangGraph Server; the thread waits.
    assert (await alice.runs.get(tid, run["run_id"]))["status"] == "success"
    values = await alice.runs.wait(tid, "agent", input=None)
    assert values["status"] == "verified"


async def test_interrupt_after_star(alice: Any) -> None:
    tid = (await alice.threads.create())["thread_id"]
    await alice.runs.wait(tid, "agent", input=QUICK, interrupt_after="*")
    assert (await alice.threads.get_state(tid))["next"]  # paused after the first node


async def test_breakpoints_hostile(raw: httpx.AsyncClient) -> None:
    tid = (await raw.post("/threads", json={})).json()["thread_id"]
    url = f"/threads/{tid}/runs"
    got = await raw.post(url, json={"assistant_id": "agent", "interrupt_before": ["nope"]})
    assert got.status_code == 422
    assert "nope" in got.text and "tools" in got.text
    for bad in ("tools", 5, [5], ["x" * 10_000], {"a": 1}, ["tools"] * 5000):
        got = await raw.post(url, json={"assistant_id": "agent", "interrupt_after": bad})
        assert got.status_code == 422, (bad, got.text)
    assert (await raw.get(url)).json() == []


# -- multitask_strategy interrupt / rollback ---------------------------------------------------


async def test_interrupt_cancels_the_active_run_then_runs(alice: Any) -> None:
    tid = (await alice.threads.create())["thread_id"]
    first = await alice.runs.create(tid, "agent", input=SLOW, stream_mode=MODES)
    await asyncio.wait_for(started(alice, tid, first["run_id"]), 30)
    second = await alice.runs.create(tid, "agent", input=QUICK, multitask_strategy="interrupt")
    assert second["multitask_strategy"] == "interrupt"
    await alice.runs.join(tid, second["run_id"])
    old = await alice.runs.get(tid, first["run_id"])
    new = await alice.runs.get(tid, second["run_id"])
    assert (old["status"], new["status"]) == ("interrupted", "success")
    assert old["updated_at"] <= new["updated_at"]


async def test_rollback_removes_the_run_and_its_checkpoints(alice: Any) -> None:
    tid = (await alice.threads.create())["thread_id"]
    before = await alice.runs.wait(tid, "agent", input=QUICK)
    first = await alice.runs.create(tid, "agent", input=SLOW, stream_mode=MODES)
    await asyncio.wait_for(started(alice, tid, first["run_id"]), 30)
    second = await alice.runs.create(tid, "agent", input=QUICK, multitask_strategy="rollback")
    after = await alice.runs.join(tid, second["run_id"])
    assert after["status"] == before["status"] == "verified"
    with pytest.raises(NotFoundError):
        await alice.runs.get(tid, first["run_id"])
    history = await alice.threads.get_history(tid, limit=1000)
    run_ids = {(h["metadata"] or {}).get("run_id") for h in history}
    assert first["run_id"] not in run_ids
    assert second["run_id"] in run_ids


async def test_rollback_racing(alice: Any) -> None:
    """Concurrent rollbacks against one active run: each is queued (no 5xx, no deadlock); the
    last one runs, every run before it is cancelled and removed, the thread ends idle."""
    tid = (await alice.threads.create())["thread_id"]
    first = await alice.runs.create(tid, "agent", input=SLOW, stream_mode=MODES)
    await asyncio.wait_for(started(alice, tid, first["run_id"]), 30)
    racing = await asyncio.gather(
        *(
            alice.runs.create(tid, "agent", input=QUICK, multitask_strategy="rollback")
            for _ in range(4)
        )
    )
    for run in racing:
        try:  # each cancelled (and rolled back) the ones queued before it, but the last
            await alice.runs.join(tid, run["run_id"])
        except (NotFoundError, httpx.HTTPStatusError) as err:
            assert "404" in str(err) or isinstance(err, NotFoundError), err
    newest = max(racing, key=lambda r: r["created_at"])["run_id"]
    left = await alice.runs.list(tid, limit=100)
    assert [(r["run_id"], r["status"]) for r in left] == [(newest, "success")], left
    assert first["run_id"] not in {r["run_id"] for r in left}
    assert (await alice.threads.get(tid))["status"] == "idle"


# -- stream modes messages and events ----------------------------------------------------------


async def test_messages_mode_sends_partial_complete_metadata(alice: Any) -> None:
    tid = (await alice.threads.create())["thread_id"]
    parts = await collect(alice.runs.stream(tid, "agent", input=QUICK, stream_mode="messages"))
    names = [p.event for p in parts]
    assert "messages" not in names, names  # the tuple form is messages-tuple's
    assert "messages/metadata" in names, names
    assert {"messages/partial", "messages/complete"} & set(names), names
    for part in parts:
        if part.event in ("messages/partial", "messages/complete"):
            assert isinstance(part.data, list) and part.data[0]["type"] in ("ai", "tool", "human")
        if part.event == "messages/metadata":
            assert all("metadata" in v for v in part.data.values())
    # A replay from the middle sends exactly what came after it.
    run_id = parts[0].data["run_id"]
    middle = len(parts) // 2
    again = await collect(
        alice.runs.join_stream(tid, run_id, stream_mode="messages", last_event_id=parts[middle].id)
    )
    tail = [p for p in parts if int(p.id) > int(parts[middle].id)]
    assert [(p.event, p.data) for p in again] == [(p.event, p.data) for p in tail]
    tuples = await collect(alice.runs.join_stream(tid, run_id, stream_mode="messages-tuple"))
    assert "messages" in [p.event for p in tuples]


async def test_events_mode_is_served(alice: Any) -> None:
    tid = (await alice.threads.create())["thread_id"]
    parts = await collect(alice.runs.stream(tid, "agent", input=QUICK, stream_mode="events"))
    assert parts[-1].event == "end" and parts[-1].data["status"] == "success"
    events = [p.data for p in parts if p.event == "events"]
    assert events, [p.event for p in parts]
    assert {e["event"] for e in events} <= {"on_chat_model_stream", "on_chat_model_end"}


async def test_debug_mode_is_still_refused(raw: httpx.AsyncClient) -> None:
    got = await raw.post("/runs", json={"assistant_id": "agent", "stream_mode": "debug"})
    assert got.status_code == 422 and "events" in got.text
