"""``GET /metrics`` (Prometheus) scraped from real servers after real runs, parsed with
``prometheus_client``'s own parser: runs by status, queue depth, attempts, claim delay,
takeovers, SSE clients, the pool; and as protected as every other route."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from api.http.service_metrics import ServiceMetrics
from api.platform.metrics import StepTimer, observe_event_batch, observe_step
from tests.utils.keys import create_key
from tests.utils.runs import MODES, new_thread, read_events, wait_status
from tests.utils.server import ServerProcess
from tests.utils.sse import SSEEvent, read_sse
from tests.utils.tasks import counter

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


async def scrape(http: httpx.AsyncClient) -> Samples:
    response = await http.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def scrape_until(
    http: httpx.AsyncClient, condition: Callable[[Samples], bool], timeout: float = 10.0
) -> Samples:
    deadline = time.monotonic() + timeout
    while True:
        samples = await scrape(http)
        if condition(samples):
            return samples
        assert time.monotonic() < deadline, "the metrics never reached the expected values"
        await asyncio.sleep(0.05)


def tool_finished(events: list[object]) -> int:
    return sum(
        1
        for e in events
        if getattr(e, "event", None) == "custom"
        and getattr(e, "data", {}).get("type") == "tool_finished"
    )


async def test_a_run_is_counted_while_it_streams_and_once_it_ended(
    http: httpx.AsyncClient,
) -> None:
    before = await scrape(http)
    assert value(before, "threadline_sse_clients") == 0
    assert value(before, "threadline_queue_depth") == 0
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(3, 0.4), "stream_mode": MODES}
    events: list[SSEEvent] = []
    during: Samples = {}
    queued = None
    async with (
        asyncio.timeout(60),
        http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response,
    ):
        assert response.status_code == 200
        async for frame in read_sse(response):
            if frame.is_comment:
                continue
            events.append(frame)
            if frame.event == "metadata":
                # While it streams: one client, one run running; a second run queued behind it.
                queued = await http.post(
                    f"/threads/{tid}/runs",
                    json={
                        "assistant_id": "agent",
                        "input": counter(1),
                        "multitask_strategy": "enqueue",
                    },
                )
                assert queued.status_code == 200, queued.text
                await asyncio.sleep(0.3)
                during = await scrape(http)
            if frame.event == "end":
                break
    assert value(during, "threadline_sse_clients") == 1
    assert value(during, "threadline_runs", status="running") == 1
    assert value(during, "threadline_runs", status="pending") == 1
    assert value(during, "threadline_queue_depth") == 1
    assert value(during, "threadline_oldest_pending_run_age_seconds") >= 0.25
    rid = events[0].data["run_id"]
    assert queued is not None
    assert events[-1].event == "end" and events[-1].data == {"run_id": rid, "status": "success"}
    await wait_status(http, tid, queued.json()["run_id"], "success")

    # The stream's response has returned once the gauge is back to 0 (shortly after `end`).
    after = await scrape_until(http, lambda s: value(s, "threadline_sse_clients") == 0)
    success = value(after, "threadline_runs", status="success")
    assert success - value(before, "threadline_runs", status="success") == 2
    assert value(after, "threadline_runs", status="running") == 0
    assert value(after, "threadline_queue_depth") == 0
    assert value(after, "threadline_oldest_pending_run_age_seconds") == 0
    for status in ("error", "interrupted", "timeout"):
        assert value(after, "threadline_runs", status=status) == 0
    attempts = "threadline_attempts_started_total"
    assert value(after, attempts) - value(before, attempts) == 2
    assert value(after, "threadline_takeovers_total") == value(before, "threadline_takeovers_total")
    # Both first claims were observed: the queued one waited for the first run to end.
    delays = "threadline_claim_delay_seconds_count"
    assert value(after, delays) - value(before, delays) == 2
    slow = "threadline_claim_delay_seconds_bucket"
    assert value(after, slow, le="0.5") - value(before, slow, le="0.5") <= 1
    # The event log's writes (api.durable.event_writer reports each batch).
    batches = "threadline_event_batch_size_count"
    assert value(after, batches) > value(before, batches)
    assert value(after, "threadline_event_batch_size_sum") - value(
        before, "threadline_event_batch_size_sum"
    ) >= len(events)
    # Every step of the agent was timed, by node.
    steps = "threadline_step_duration_seconds_count"
    for node in ("agent", "tools", "verify"):
        timed_before = before.get((steps, frozenset({("node", node)})), 0.0)
        assert value(after, steps, node=node) > timed_before, node
    # The pool: connections open, requests counted, none waiting now.
    assert value(after, "threadline_pool_size") >= 1
    assert value(after, "threadline_pool_max_size") >= value(after, "threadline_pool_size")
    requests = "threadline_pool_requests_total"
    assert value(after, requests) > value(before, requests)
    assert value(after, "threadline_pool_requests_waiting") == 0
    assert value(after, "threadline_pool_connections_in_use") >= 0
    assert value(after, "threadline_pool_requests_wait_seconds_total") >= 0


async def test_ok_is_public_but_metrics_follow_auth(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    proc = make_server(database_url, data, env={"THREADLINE_AUTH": "keys"}, name="keys")
    proc.start()
    key = await asyncio.to_thread(create_key, data, database_url, "ops")
    async with httpx.AsyncClient(base_url=proc.url, timeout=30) as http:
        assert (await http.get("/ok")).status_code == 200
        missing = await http.get("/metrics")
        assert missing.status_code == 401, missing.text
        assert "threadline_" not in missing.text
        wrong = await http.get("/metrics", headers={"x-api-key": "tl_0000_wrong"})
        assert wrong.status_code == 401, wrong.text
        for headers in ({"x-api-key": key}, {"Authorization": f"Bearer {key}"}):
            response = await http.get("/metrics", headers=headers)
            assert response.status_code == 200, response.text
            assert value(parse(response.text), "threadline_sse_clients") == 0


@pytest.mark.slow
async def test_a_takeover_after_a_kill_is_counted_by_the_process_that_took_it(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    server = make_server(database_url, tmp_path / "data")
    server.start()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        tid = await new_thread(http)
        body = {"assistant_id": "agent", "input": counter(6, 0.4), "stream_mode": MODES}
        async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as response:
            seen = await read_events(response, stop=lambda evs: tool_finished(list(evs)) >= 2)
        rid = seen[0].data["run_id"]
    server.restart()  # SIGKILL, then a new process on the same database
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        run = await wait_status(http, tid, rid, "success", timeout=60)
        assert run["attempt"] == 2
        samples = await scrape(http)
    assert value(samples, "threadline_attempts_started_total") == 1
    assert value(samples, "threadline_takeovers_total") == 1
    assert value(samples, "threadline_claim_delay_seconds_count") == 0  # not a first claim
    assert value(samples, "threadline_runs", status="success") == 1


def test_each_app_has_its_own_registry_with_the_process_metrics() -> None:
    """Two apps in one process register without colliding; what the event writer and the
    executor report (``observe_event_batch``, ``observe_step``) shows in both."""
    first, second = ServiceMetrics(), ServiceMetrics()
    before = parse(generate_latest(first.registry).decode())
    observe_event_batch(5, 0.002)
    observe_step("tools", 0.3)
    for metrics in (first, second):
        samples = parse(generate_latest(metrics.registry).decode())
        batches = "threadline_event_batch_size_count"
        assert value(samples, batches) - value(before, batches) == 1
        assert value(samples, "threadline_event_batch_size_bucket", le="4.0") == value(
            before, "threadline_event_batch_size_bucket", le="4.0"
        )
        assert value(samples, "threadline_event_write_seconds_sum") >= 0.002
        assert value(samples, "threadline_step_duration_seconds_count", node="tools") >= 1
        step = "threadline_step_duration_seconds_bucket"
        # 0.3 s: counted in the 0.5 s bucket, not in the 0.25 s one.
        below, within = (value(samples, step, node="tools", le=le) for le in ("0.25", "0.5"))
        assert within > below


class Steps(TypedDict, total=False):
    done: list[str]


async def test_step_timer_times_each_superstep_between_checkpoints_by_node() -> None:
    """The executor's timer: a node's step runs from the previous checkpoint (the checkpointer
    calls ``checkpoint()`` first thing) to its ``updates`` chunk, streamed with ``custom`` as
    the service always does."""
    timer = StepTimer()

    class TimedSaver(InMemorySaver):
        async def aput(self, config: Any, *args: Any) -> Any:
            timer.checkpoint()
            return await super().aput(config, *args)

    async def slow(state: Steps) -> Steps:
        await asyncio.sleep(0.3)
        return {"done": ["slow"]}

    def quick(state: Steps) -> Steps:
        return {"done": ["slow", "quick"]}

    builder = StateGraph(Steps)
    builder.add_node("slow_node", slow)
    builder.add_node("quick_node", quick)
    builder.add_edge(START, "slow_node")
    builder.add_edge("slow_node", "quick_node")
    builder.add_edge("quick_node", END)
    metrics = ServiceMetrics()
    graph = builder.compile(checkpointer=TimedSaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    async for mode, chunk in graph.astream(
        {}, config, stream_mode=["updates", "custom"], durability="sync"
    ):
        timer.feed(mode, chunk)
    samples = parse(generate_latest(metrics.registry).decode())
    count, total = "threadline_step_duration_seconds_count", "threadline_step_duration_seconds_sum"
    # Node names no other test uses: their series start here.
    assert value(samples, count, node="slow_node") == value(samples, count, node="quick_node") == 1
    assert value(samples, total, node="slow_node") >= 0.3
    assert value(samples, total, node="quick_node") < value(samples, total, node="slow_node")
