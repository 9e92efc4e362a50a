"""Run-create fields: a field the server does not know is a 422 that names it; LangGraph Server's
fields it does not serve are refused when set, saying why; ``durability`` ``sync``/``async`` and
``stream_resumable`` are accepted. Nothing is silently ignored, and a refused run creates
nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.utils.runs import new_thread, wait_status
from tests.utils.tasks import greet


async def test_sync_and_async_durability_run_and_exit_is_refused_saying_why(
    http: httpx.AsyncClient,
) -> None:
    for durability in ("sync", "async"):
        tid = await new_thread(http)
        created = await http.post(
            f"/threads/{tid}/runs",
            json={
                "assistant_id": "agent",
                "input": greet(),
                "durability": durability,
                "stream_resumable": True,
                "strict_resume": True,
            },
        )
        assert created.status_code == 200, created.text
        await wait_status(http, tid, created.json()["run_id"], {"success"})


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("durability", "exit", "checkpoints every step"),
        ("checkpoint_during", False, "checkpoints every step"),
        (
            "webhook",
            "http://127.0.0.1:9/hook",
            "loopback",
        ),  # the SSRF guard (api.contract.webhook_url)
        ("after_seconds", 30, "after_seconds is not supported"),
        ("feedback_keys", ["correct"], "feedback_keys is not supported"),
        ("langsmith_tracer", {"project_name": "p"}, "langsmith_tracer is not supported"),
        ("strict_resume", False, "strict_resume false is not supported"),
        ("stream_subgraph", True, "stream_subgraph"),  # a typo: named, not ignored
        ("assistant", "agent", "assistant"),
    ],
)
async def test_a_field_not_served_is_refused_naming_it_and_nothing_is_created(
    http: httpx.AsyncClient, field: str, value: Any, says: str
) -> None:
    tid = await new_thread(http)
    for path in (
        f"/threads/{tid}/runs",
        f"/threads/{tid}/runs/stream",
        f"/threads/{tid}/runs/wait",
    ):
        refused = await http.post(
            path, json={"assistant_id": "agent", "input": greet(), field: value}
        )
        assert refused.status_code == 422, (path, refused.text)
        detail = refused.json()["detail"]
        assert field in detail and says in detail, detail
    assert (await http.get(f"/threads/{tid}/runs")).json() == []
