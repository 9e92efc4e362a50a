"""Approvals survive ``kill -9``: a pending interrupt outlives the server, and
an accepted decision is applied exactly once after a restart.

Each test has its own database, data directory and server (``make_server``), which it SIGKILLs
and restarts on the same port.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.utils.runs import MODES, sdk_client
from tests.utils.server import ServerProcess
from tests.utils.sse import read_sse
from tests.utils.tasks import greet, notes
from tests.utils.workspace import workspace_path

WAIT = 60.0


async def interrupted_thread(url: str, payload: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """A new thread whose first run ended waiting for approval; its id and the interrupts."""
    async with sdk_client(url) as client:
        tid = (await client.threads.create())["thread_id"]
        values = await asyncio.wait_for(client.runs.wait(tid, "agent", input=payload), WAIT)
        pending: list[dict[str, Any]] = values["__interrupt__"]
        assert pending, values
        return tid, pending


async def audit_rows(url: str, tid: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as http:
        res = await http.get(f"/threads/{tid}/audit")
    assert res.status_code == 200, res.text
    rows: list[dict[str, Any]] = res.json()
    return rows


def writes_per_call(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(r["tool_call_id"] for r in rows if r["kind"] == "tool")


async def test_pending_approval_survives_kill(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    server = make_server(database_url, tmp_path / "data", name="approval-kill").start()
    tid, [interrupt] = await interrupted_thread(server.url, greet())

    server.kill()
    server.start()

    async with sdk_client(server.url) as client:
        state = await client.threads.get_state(tid)
        assert [i["id"] for i in state["interrupts"]] == [interrupt["id"]]
        assert state["interrupts"][0]["value"] == interrupt["value"]
        assert (await client.threads.get(tid))["status"] == "interrupted"
        greeting = workspace_path(server.data_dir, tid, "greeting.txt")
        assert not greeting.exists()

        values = await asyncio.wait_for(
            client.runs.wait(
                tid,
                "agent",
                command={"resume": {interrupt["id"]: {"decisions": [{"type": "approve"}]}}},
            ),
            WAIT,
        )
        assert values["status"] == "verified", values.get("verdict")
        assert greeting.read_text() == "Hello, Ada!\n"
        rows = await audit_rows(server.url, tid)
        assert writes_per_call(rows) == dict.fromkeys(interrupt["value"]["tool_call_ids"], 1), rows
        assert sum(r["kind"] == "decision" for r in rows) == 1


async def test_kill_right_after_the_approval_is_accepted(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """``notes`` asks about its two writes in one interrupt; the answer approves the first and
    rejects the second. Killed as the answer is accepted, the run after the restart applies
    each decision to its own call, once: a.txt is written once, b.txt never."""
    server = make_server(database_url, tmp_path / "data", name="approval-kill").start()
    tid, [interrupt] = await interrupted_thread(server.url, notes())
    a_call, b_call = interrupt["value"]["tool_call_ids"]
    answer = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "not b"}]}
    answers = {interrupt["id"]: answer}

    async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as http:
        res = await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "agent", "command": {"resume": answers}, "stream_mode": MODES},
        )
        # Killed the moment the decision is accepted: before its run can have finished.
        server.kill()
    assert res.status_code == 200, res.text
    run_id = res.json()["run_id"]
    assert res.json()["status"] == "pending"

    server.start()
    async with sdk_client(server.url) as client:
        values = await asyncio.wait_for(client.runs.join(tid, run_id), WAIT)
        run = await client.runs.get(tid, run_id)
        assert run["status"] == "success", run
        assert values["status"] == "failed", values.get("verdict")  # b.txt was not written
        assert "__interrupt__" not in values
        assert (await client.threads.get(tid))["status"] == "idle"

        assert workspace_path(server.data_dir, tid, "a.txt").read_text() == "alpha\n"
        assert not workspace_path(server.data_dir, tid, "b.txt").exists()
        results = {m["tool_call_id"]: m for m in values["messages"] if m["type"] == "tool"}
        assert results[a_call]["status"] == "success"
        assert results[b_call]["status"] == "error" and "not b" in results[b_call]["content"]
        rows = await audit_rows(server.url, tid)
        assert writes_per_call(rows) == {a_call: 1}, rows
        decided = [r["detail"] for r in rows if r["kind"] == "decision"]
        assert decided == [{"interrupt_id": interrupt["id"], "answer": answer, "via": "http"}]

        # After the restart the same answer is refused: the interrupt was answered once.
        both = {"decisions": [{"type": "approve"}, {"type": "approve"}]}
        async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as http:
            again = await http.post(
                f"/threads/{tid}/approvals", json={"interrupt_id": interrupt["id"], **both}
            )
            assert again.status_code == 409, again.text
            again = await http.post(
                f"/threads/{tid}/runs",
                json={"assistant_id": "agent", "command": {"resume": answers}},
            )
            assert again.status_code == 409, again.text
        assert writes_per_call(await audit_rows(server.url, tid)) == {a_call: 1}
        assert not workspace_path(server.data_dir, tid, "b.txt").exists()
        assert len(await client.runs.list(tid)) == 2


async def test_kill_while_the_approved_calls_run(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """SIGKILL once the resuming run's first ``tool_started`` is read: every write that ran is
    in the audit log (none lost because its result was checkpointed before its event was
    stored), and a call runs again only in a later attempt."""
    server = make_server(database_url, tmp_path / "data", name="approval-kill").start()
    tid, [interrupt] = await interrupted_thread(server.url, notes())
    call_ids = set(interrupt["value"]["tool_call_ids"])
    assert len(call_ids) == 2
    answers = {interrupt["id"]: {"decisions": [{"type": "approve"}, {"type": "approve"}]}}

    async with httpx.AsyncClient(base_url=server.url, timeout=30.0) as http:
        res = await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "agent", "command": {"resume": answers}, "stream_mode": MODES},
        )
        assert res.status_code == 200, res.text
        run_id = res.json()["run_id"]
        seen = False
        async with (
            asyncio.timeout(WAIT),
            http.stream(
                "GET", f"/threads/{tid}/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"}
            ) as stream,
        ):
            async for event in read_sse(stream):
                if event.event == "custom" and event.data.get("type") == "tool_started":
                    server.kill()
                    seen = True
                    break
        assert seen, "the resumed run never started a tool"

    server.start()
    async with sdk_client(server.url) as client:
        values = await asyncio.wait_for(client.runs.join(tid, run_id), WAIT)
        run = await client.runs.get(tid, run_id)
        assert run["status"] == "success" and run["attempt"] == 2, run
        assert values["status"] == "verified", values.get("verdict")
        for name, text in (("a.txt", "alpha\n"), ("b.txt", "beta\n")):
            assert workspace_path(server.data_dir, tid, name).read_text() == text

        rows = await audit_rows(server.url, tid)
        tools = [r for r in rows if r["kind"] == "tool"]
        assert {r["tool_call_id"] for r in tools} == call_ids, rows
        for call_id in call_ids:
            attempts = [r["attempt"] for r in tools if r["tool_call_id"] == call_id]
            assert len(attempts) == len(set(attempts)), (call_id, rows)
        decided = [r["detail"]["interrupt_id"] for r in rows if r["kind"] == "decision"]
        assert decided == [interrupt["id"]]
