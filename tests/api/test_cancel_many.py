"""``POST /runs/cancel`` (the SDKs' ``runs.cancel_many``): by thread, by run ids, by status;
``action=rollback`` removes the cancelled runs and their checkpoints."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.utils.runs import wait_status
from tests.utils.tasks import counter

SLOW = counter(20, 0.5)


async def start(client: Any) -> tuple[str, str]:
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "agent", input=SLOW)
    return thread["thread_id"], run["run_id"]


async def test_cancel_many_by_thread_by_ids_and_by_status(
    client: Any, http: httpx.AsyncClient
) -> None:
    a = await start(client)
    b = await start(client)
    c = await start(client)
    await client.runs.cancel_many(thread_id=a[0])
    assert (await wait_status(http, *a, ("interrupted",)))["error"] == "cancelled on request"
    await client.runs.cancel_many(thread_id=b[0], run_ids=[b[1]])
    await wait_status(http, *b, ("interrupted",))
    await client.runs.cancel_many(status="all")
    await wait_status(http, *c, ("interrupted",))


async def test_cancel_many_with_rollback_removes_the_run(
    client: Any, http: httpx.AsyncClient
) -> None:
    thread_id, run_id = await start(client)
    await client.runs.cancel_many(thread_id=thread_id, action="rollback")
    gone = await http.get(f"/threads/{thread_id}/runs/{run_id}")
    assert gone.status_code == 404, gone.text


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "name the runs to cancel"),
        ({"thread_id": "t", "run_ids": ["not-a-uuid"]}, "run_ids"),
        ({"status": "finished"}, "status"),
    ],
)
async def test_a_bad_bulk_cancel_is_a_422(
    http: httpx.AsyncClient, body: dict[str, Any], says: str
) -> None:
    res = await http.post("/runs/cancel", json=body)
    assert res.status_code == 422, res.text
    assert says in res.json()["detail"]


async def test_another_threads_runs_are_not_found(http: httpx.AsyncClient) -> None:
    res = await http.post("/runs/cancel", json={"thread_id": "no-such-thread"})
    assert res.status_code == 404, res.text
