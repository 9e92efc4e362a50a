"""A run's ``durability``, LangGraph Server's parameter: ``sync`` and ``async`` are accepted (every
run here is checkpointed at each step), ``exit`` is refused with the reason."""

from __future__ import annotations

import httpx

from tests.utils.runs import new_thread, wait_status
from tests.utils.tasks import greet


async def test_sync_and_async_run_and_exit_is_refused_saying_why(http: httpx.AsyncClient) -> None:
    for durability in ("sync", "async"):
        tid = await new_thread(http)
        created = await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "agent", "input": greet(), "durability": durability},
        )
        assert created.status_code == 200, created.text
        await wait_status(http, tid, created.json()["run_id"], {"success"})
    tid = await new_thread(http)
    refused = await http.post(
        f"/threads/{tid}/runs",
        json={"assistant_id": "agent", "input": greet(), "durability": "exit"},
    )
    assert refused.status_code == 422, refused.text
    assert (
        "durability" in refused.json()["detail"]
        and "checkpoints every step" in (refused.json()["detail"])
    )
    assert (await http.get(f"/threads/{tid}/runs")).json() == []
