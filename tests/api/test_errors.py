"""Whatever a client sends, the answer is a 4xx with a ``detail`` that says what to do, never a 500.

One server for the module (its own database) with a small body limit.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from tests.utils.runs import new_thread, wait_status
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter

SERVER_ENV = {"THREADLINE_MAX_BODY_BYTES": "2048"}
"""Read by the ``server`` fixture (tests/api/conftest.py)."""


def expect(response: httpx.Response, status: int, *fragments: str) -> str:
    """``response`` has ``status`` and a JSON ``detail`` string containing every fragment."""
    assert response.status_code == status, (response.status_code, response.text)
    detail = response.json()["detail"]
    assert isinstance(detail, str) and len(detail) > 10, detail
    for fragment in fragments:
        assert fragment.lower() in detail.lower(), (fragment, detail)
    return detail


async def interrupted_greet_thread(http: httpx.AsyncClient) -> tuple[str, str]:
    """A thread waiting for approval of its write_file call; returns (thread id, interrupt id)."""
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": {"task": {"name": "greet"}}}
    values = (await http.post(f"/threads/{tid}/runs/wait", json=body)).json()
    assert values["__interrupt__"], values
    return tid, values["__interrupt__"][0]["id"]


async def test_malformed_and_mistyped_bodies_are_422(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    bad_json = await http.post(
        f"/threads/{tid}/runs",
        content=b'{"assistant_id": "agent", "input": ',
        headers={"content-type": "application/json"},
    )
    expect(bad_json, 422, "not valid JSON")
    expect(
        await http.post(f"/threads/{tid}/runs", json={"assistant_id": "agent", "stream_mode": 5}),
        422,
        "stream_mode",
    )
    expect(await http.post(f"/threads/{tid}/runs", json={"assistant_id": 3}), 422, "assistant_id")
    expect(await http.post(f"/threads/{tid}/runs", json={}), 422, "assistant_id")
    expect(await http.post(f"/threads/{tid}/runs", json=[1, 2]), 422)
    expect(
        await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "agent", "input": counter(1, 0), "command": {"resume": 1}},
        ),
        422,
        "either 'input' or 'command'",
    )
    expect(
        await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "agent", "multitask_strategy": "sideways"},
        ),
        422,
        "enqueue",
    )
    expect(await http.post("/threads", json={"thread_id": "../x"}), 422, "thread_id")
    expect(await http.post("/threads/search", json={"status": "sleeping"}), 422, "status")
    expect(await http.post("/threads/search", json={"limit": "many"}), 422, "limit")
    expect(await http.post("/threads/search", json={"select": ["secrets"]}), 422, "select")
    # Nothing was queued by any of these.
    assert (await http.get(f"/threads/{tid}/runs")).json() == []


async def test_unknown_things_are_404(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    expect(
        await http.post(f"/threads/{tid}/runs", json={"assistant_id": "nope"}),
        404,
        "nope",
        "a served graph's name (agent)",
    )
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    expect(await http.get(f"/threads/{missing}"), 404, missing, "POST /threads")
    expect(await http.get(f"/threads/{missing}/state"), 404, missing)
    expect(await http.post(f"/threads/{missing}/history", json={}), 404, missing)
    expect(await http.get(f"/threads/{missing}/runs"), 404, missing)
    expect(await http.patch(f"/threads/{missing}", json={"metadata": {}}), 404, missing)
    expect(await http.delete(f"/threads/{missing}"), 404, missing)
    expect(
        await http.post(f"/threads/{missing}/runs", json={"assistant_id": "agent"}),
        404,
        "if_not_exists",
    )
    for run_id in (str(uuid.uuid4()), "not-a-uuid"):
        base = f"/threads/{tid}/runs/{run_id}"
        expect(await http.get(base), 404, run_id)
        expect(await http.get(base + "/join"), 404, run_id)
        expect(await http.get(base + "/stream"), 404, run_id)
        expect(await http.post(base + "/cancel"), 404, run_id)
    expect(await http.get("/no/such/endpoint"), 404, "/docs")
    expect(await http.put(f"/threads/{tid}"), 405, "not allowed")


async def test_oversized_body_is_413(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    big = {"assistant_id": "agent", "metadata": {"blob": "x" * 10_000}}
    expect(await http.post(f"/threads/{tid}/runs", json=big), 413, "2048", "MAX_BODY_BYTES")
    expect(await http.post("/threads", json={"metadata": {"blob": "y" * 10_000}}), 413, "2048")

    async def chunks() -> Any:  # no Content-Length: the limit is counted as the body arrives
        for _ in range(10):
            yield b" " * 1024

    chunked = await http.post(
        f"/threads/{tid}/runs", content=chunks(), headers={"content-type": "application/json"}
    )
    expect(chunked, 413, "too large")
    # Under the limit, the same endpoint works.
    ok = await http.post(f"/threads/{tid}/runs", json={"assistant_id": "agent", "metadata": {}})
    assert ok.status_code == 200, ok.text
    await wait_status(http, tid, ok.json()["run_id"], {"success", "error"})


async def test_busy_thread_reject_and_enqueue(
    http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid = await new_thread(http)
    first = await http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "agent", "input": counter(1, 3)}
    )
    assert first.status_code == 200
    first_id = first.json()["run_id"]
    await wait_status(http, tid, first_id, {"running"})

    second = {"assistant_id": "agent", "input": counter(2, 0)}
    expect(
        await http.post(f"/threads/{tid}/runs", json=second),
        409,
        first_id,
        "enqueue",
    )
    expect(await http.post(f"/threads/{tid}/runs/stream", json=second), 409, "already has")
    expect(await http.post(f"/threads/{tid}/runs/wait", json=second), 409, "already has")
    expect(await http.delete(f"/threads/{tid}"), 409, "cancel")

    queued = await http.post(
        f"/threads/{tid}/runs", json={**second, "multitask_strategy": "enqueue"}
    )
    assert queued.status_code == 200, queued.text
    queued_id = queued.json()["run_id"]
    assert queued.json()["status"] == "pending"
    # It waits for the first run: still pending while the first one runs.
    await asyncio.sleep(1.0)
    assert (await http.get(f"/threads/{tid}/runs/{first_id}")).json()["status"] == "running"
    assert (await http.get(f"/threads/{tid}/runs/{queued_id}")).json()["status"] == "pending"

    done_first = await wait_status(http, tid, first_id, {"success"}, timeout=30)
    done_second = await wait_status(http, tid, queued_id, {"success"}, timeout=30)
    assert done_second["updated_at"] > done_first["updated_at"]
    assert (await http.get(f"/threads/{tid}")).json()["status"] == "idle"

    # Cancelling a finished run: 409 that says so.
    expect(await http.post(f"/threads/{tid}/runs/{first_id}/cancel"), 409, "already finished")


APPROVE = {"decisions": [{"type": "approve"}]}


async def test_resume_errors(http: httpx.AsyncClient) -> None:
    # A thread with nothing pending.
    idle = await new_thread(http)
    resume = {"assistant_id": "agent", "command": {"resume": {"decisions": [{"type": "approve"}]}}}
    expect(await http.post(f"/threads/{idle}/runs", json=resume), 409, "no pending interrupt")

    tid, interrupt_id = await interrupted_greet_thread(http)
    stale = "0" * 32
    detail = expect(
        await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "agent", "command": {"resume": {stale: APPROVE}}},
        ),
        409,
        stale,
    )
    assert interrupt_id in detail  # it lists what is pending

    decisions = [{"type": "maybe"}]
    maybe = {
        "assistant_id": "agent",
        "command": {"resume": {interrupt_id: {"decisions": decisions}}},
    }
    expect(await http.post(f"/threads/{tid}/runs", json=maybe), 422, interrupt_id)
    expect(
        await http.post(
            f"/threads/{tid}/approvals", json={"interrupt_id": interrupt_id, "decisions": decisions}
        ),
        422,
        "decision",
    )
    # The old answer: a 422 that shows the new one.
    expect(
        await http.post(
            f"/threads/{tid}/approvals", json={"interrupt_id": interrupt_id, "decision": "approve"}
        ),
        422,
        '{"decisions": [<one decision per action request, in their order>]}',
    )
    edit_bad = {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "write_file", "args": {"path": 7}}}
        ]
    }
    expect(
        await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "agent", "command": {"resume": {interrupt_id: edit_bad}}},
        ),
        422,
        interrupt_id,
    )
    # None of the refused answers was recorded: the thread still waits, and approving works.
    assert (await http.get(f"/threads/{tid}")).json()["status"] == "interrupted"
    approve = await http.post(
        f"/threads/{tid}/approvals", json={"interrupt_id": interrupt_id, **APPROVE}
    )
    assert approve.status_code == 200, approve.text
    await wait_status(http, tid, approve.json()["run_id"], {"success"})
    again = await http.post(
        f"/threads/{tid}/approvals",
        json={"interrupt_id": interrupt_id, "decisions": [{"type": "reject"}]},
    )
    assert again.status_code == 409, again.text


async def test_bad_last_event_id_is_422(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(1, 0)}
    rid = (await http.post(f"/threads/{tid}/runs", json=body)).json()["run_id"]
    response = await http.get(f"/threads/{tid}/runs/{rid}/stream", headers={"Last-Event-ID": "abc"})
    expect(response, 422, "Last-Event-ID", "abc")
    response = await http.get(
        f"/threads/{tid}/runs/{rid}/stream", params={"stream_mode": "telepathy"}
    )
    expect(response, 422, "telepathy")
    await wait_status(http, tid, rid, {"success"})


async def test_workspace_path_traversal_is_refused(http: httpx.AsyncClient) -> None:
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(1, 0)}
    assert (await http.post(f"/threads/{tid}/runs/wait", json=body)).status_code == 200
    assert (await http.get(f"/threads/{tid}/workspace/counter.txt")).text == "1\n"
    for path in ("..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "..%2F..%2F..%2F..%2Fetc%2Fhosts"):
        response = await http.get(f"/threads/{tid}/workspace/{path}")
        assert 400 <= response.status_code < 500, (path, response.status_code)
        assert "root:" not in response.text
        assert isinstance(response.json()["detail"], str)
    expect(await http.get(f"/threads/{tid}/workspace/nothing.txt"), 404, "nothing.txt")


async def test_creating_a_thread_twice_is_409(http: httpx.AsyncClient) -> None:
    thread_id = f"twice-{uuid.uuid4().hex[:8]}"
    await new_thread(http, thread_id=thread_id, metadata={"n": 1})
    expect(await http.post("/threads", json={"thread_id": thread_id}), 409, thread_id, "do_nothing")
    same = await http.post("/threads", json={"thread_id": thread_id, "if_exists": "do_nothing"})
    assert same.status_code == 200
    assert same.json()["metadata"] == {"n": 1}
