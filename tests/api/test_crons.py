"""Schedules (``/runs/crons``) through the official Python SDK, and their firing on replicas.

- create (threadless and on a thread), search, count, update, delete in the SDK's shapes;
- every malformed schedule is a 422 that says what to send; unknown ones are 404;
- a schedule belongs to its creator: another tenant's is not found;
- two replicas on one database, one killed and restarted, then both down: every due time fires
  exactly once while a replica runs, and a stretch with none running fires once, then the
  schedule goes on.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from api.runs.assistant_config import default_assistant_id
from tests.utils.keys import create_key
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter

GREET = {"task": {"name": "greet", "params": {"name": "Ada"}}}
COUNT = counter(1)
"""A run that needs no approval."""
AGENT = default_assistant_id("agent")


async def test_create_search_count_update_delete(client: Any) -> None:
    cron = await client.crons.create(
        "agent", schedule="*/5 * * * *", input=GREET, metadata={"suite": "crons"}
    )
    # Stored as LangGraph Server stores it: the assistant the graph's name names (its default).
    assert cron["assistant_id"] == AGENT and cron["thread_id"] is None
    assert cron["payload"]["assistant_id"] == AGENT
    assert cron["schedule"] == "*/5 * * * *" and cron["enabled"] is True
    assert cron["payload"]["input"] == GREET and cron["metadata"] == {"suite": "crons"}
    due = datetime.fromisoformat(cron["next_run_date"])
    assert due.minute % 5 == 0 and due.second == 0
    thread = await client.threads.create()
    bound = await client.crons.create_for_thread(
        thread["thread_id"], "agent", schedule="0 9 * * 1-5", timezone="Europe/Paris"
    )
    assert bound["thread_id"] == thread["thread_id"] and bound["timezone"] == "Europe/Paris"
    assert datetime.fromisoformat(bound["next_run_date"]).utcoffset() is not None

    found = await client.crons.search(assistant_id="agent", metadata={"suite": "crons"})
    assert [c["cron_id"] for c in found] == [cron["cron_id"]]
    on_thread = await client.crons.search(thread_id=thread["thread_id"], select=["cron_id"])
    assert on_thread == [{"cron_id": bound["cron_id"]}]
    assert await client.crons.count(assistant_id="agent") >= 2
    assert await client.crons.count(thread_id=thread["thread_id"]) == 1

    updated = await client.crons.update(cron["cron_id"], schedule="0 * * * *", enabled=False)
    assert updated["schedule"] == "0 * * * *" and updated["enabled"] is False
    assert updated["next_run_date"] is None
    assert await client.crons.search(enabled=False, metadata={"suite": "crons"}) != []
    again = await client.crons.update(cron["cron_id"], enabled=True, input={"x": 1})
    assert again["payload"]["input"] == {"x": 1} and again["next_run_date"] is not None

    await client.crons.delete(cron["cron_id"])
    with pytest.raises(NotFoundError):
        await client.crons.delete(cron["cron_id"])
    assert await client.crons.search(metadata={"suite": "crons"}) == []
    # Deleting the thread deletes its schedules.
    await client.threads.delete(thread["thread_id"])
    assert await client.crons.count(thread_id=thread["thread_id"]) == 0


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"schedule": "not a cron"}, "cron expression"),
        ({"schedule": "61 * * * *"}, "cron expression"),
        ({"schedule": "0 0 31 2 *"}, "ever fires"),
        ({"schedule": "* * * * * *"}, "minute resolution"),
        ({"schedule": "H * * * *"}, "cron expression"),
        ({"schedule": "*/5 * * * *", "timezone": "Mars/Olympus"}, "IANA"),
        ({"schedule": "*/5 * * * *", "webhook": "http://10.0.0.1/hook"}, "private"),
        ({"schedule": "*/5 * * * *", "end_time": "2030-01-01T00:00:00"}, "time zone offset"),
        ({"schedule": "*/5 * * * *", "multitask_strategy": "rollback"}, "enqueue"),
        ({"schedule": "*/5 * * * *", "interrupt_before": ["nope"]}, "does not have"),
        ({"schedule": "*/5 * * * *", "stream_mode": "debug"}, "stream_mode"),
        ({"schedule": "*/5 * * * *", "config": {"configurable": {"__x": 1}}}, "__"),
        ({"schedule": ""}, "schedule"),
        ({}, "schedule"),
    ],
)
async def test_malformed_schedules_are_422(
    http: httpx.AsyncClient, body: dict[str, Any], says: str
) -> None:
    r = await http.post("/runs/crons", json={"assistant_id": "agent", **body})
    assert r.status_code == 422, r.text
    assert says in r.json()["detail"], r.text


async def test_unknown_things_are_404(http: httpx.AsyncClient) -> None:
    r = await http.post("/runs/crons", json={"assistant_id": "nope", "schedule": "0 * * * *"})
    assert r.status_code == 404
    r = await http.post(
        "/threads/no-such-thread/runs/crons",
        json={"assistant_id": "agent", "schedule": "0 * * * *"},
    )
    assert r.status_code == 404
    for cron_id in ("not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        assert (await http.delete(f"/runs/crons/{cron_id}")).status_code == 404
        assert (await http.patch(f"/runs/crons/{cron_id}", json={})).status_code == 404
    r = await http.post("/runs/crons/search", json={"limit": 0})
    assert r.status_code == 422
    r = await http.post("/runs/crons/search", json={"sort_by": "owner"})
    assert r.status_code == 422


async def test_a_schedule_is_its_creators(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    env = {"THREADLINE_AUTH": "keys", "THREADLINE_CRON_MIN_INTERVAL_SECONDS": "2"}
    proc = make_server(database_url, data, env=env, name="cron-keys")
    proc.start()
    ada, bob = create_key(data, database_url, "ada"), create_key(data, database_url, "bob")
    async with (
        get_client(url=proc.url, api_key=ada) as a,
        get_client(url=proc.url, api_key=bob) as b,
    ):
        cron = await a.crons.create("agent", schedule="0 * * * *", input=GREET)
        assert cron["user_id"] == "ada"
        thread = await a.threads.create()
        assert await b.crons.search() == [] and await b.crons.count() == 0
        with pytest.raises(NotFoundError):
            await b.crons.delete(cron["cron_id"])
        with pytest.raises(NotFoundError):
            await b.crons.update(cron["cron_id"], enabled=False)
        with pytest.raises(NotFoundError):  # another tenant's thread
            await b.crons.create_for_thread(thread["thread_id"], "agent", schedule="0 * * * *")
        assert [c["cron_id"] for c in await a.crons.search()] == [cron["cron_id"]]
        await a.crons.delete(cron["cron_id"])
        # Its runs act as its owner, on the owner's thread.
        bound = await a.crons.create_for_thread(
            thread["thread_id"], "agent", schedule="*/2 * * * * *", input=COUNT
        )
        deadline = time.monotonic() + 20
        while not (made := await a.runs.list(thread["thread_id"])):
            assert time.monotonic() < deadline, "the schedule never fired"
            await asyncio.sleep(0.5)
        await a.crons.delete(bound["cron_id"])
        assert made[0]["kwargs"]["auth_user"]["identity"] == "ada"
        assert made[0]["metadata"]["cron_id"] == bound["cron_id"]


async def _due_times(url: str, cron_id: str) -> tuple[list[datetime], list[str]]:
    """Each run of the schedule: its due time, and its status."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        r = await http.post(
            "/threads/search", json={"metadata": {"cron_id": cron_id}, "limit": 1000}
        )
        due, statuses = [], []
        for thread in r.json():
            runs = (await http.get(f"/threads/{thread['thread_id']}/runs")).json()
            for run in runs:
                due.append(datetime.fromisoformat(run["metadata"]["cron_due_at"]))
                statuses.append(run["status"])
    return sorted(due), statuses


@pytest.mark.slow
async def test_every_due_time_fires_once_across_replicas_and_restarts(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    env = {"THREADLINE_CRON_MIN_INTERVAL_SECONDS": "2", "THREADLINE_CRON_POLL_SECONDS": "0.2"}
    data = tmp_path / "data"
    a = make_server(database_url, data, env=env, name="a").start()
    b = make_server(database_url, data, env=env, name="b").start()
    async with get_client(url=a.url) as client:
        # Seconds first: a test-only resolution (the minimum interval is lowered to 2 s).
        cron = await client.crons.create(
            "agent", schedule="*/3 * * * * *", input=COUNT, on_run_completed="keep"
        )
    await asyncio.sleep(8)
    a.kill()  # B alone fires
    await asyncio.sleep(7)
    a.start()
    await asyncio.sleep(7)
    a.kill()
    b.kill()  # nobody: the due times of this stretch fire once, when a replica is back
    await asyncio.sleep(8)
    b.start()
    await asyncio.sleep(7)
    async with get_client(url=b.url) as client:
        await client.crons.delete(cron["cron_id"])

    due, statuses = await _due_times(b.url, cron["cron_id"])
    assert len(due) == len(set(due)), f"a due time fired twice: {due}"
    gaps = [(y - x).total_seconds() for x, y in itertools.pairwise(due)]
    assert len(due) >= 8, due
    # Every 3 s while a replica ran; one longer gap: the stretch with none fired once.
    assert gaps.count(3.0) == len(gaps) - 1 and max(gaps) >= 6, gaps
    # They are normal durable runs: the workers of either replica finish them.
    deadline = time.monotonic() + 60
    while set(statuses) != {"success"} and time.monotonic() < deadline:
        await asyncio.sleep(1)
        due, statuses = await _due_times(b.url, cron["cron_id"])
    assert set(statuses) == {"success"}, statuses
