"""A join's ``stream_mode`` query in every form LangGraph Server reads, on the three join routes
(a run's stream, a run's stream by its id alone, the thread's active run): the parameter once,
repeated (``stream_mode=a&stream_mode=b``: the Python SDK, the JS SDK 1.x), or a JSON array
(``stream_mode=["a","b"]``: the JS SDK 2.0.0), and empty for "the run's own modes". An unknown
mode is a 422 that names it; so is an array that is not JSON, holds something other than
strings, or names more than ``MAX_QUERY_MODES`` modes. Never a 5xx.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from api.http.stream_mode_query import MAX_QUERY_MODES
from tests.api.test_errors import expect
from tests.utils.runs import new_thread, read_events, wait_status
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter

RUN_MODES = ["values", "updates", "custom"]
"""The modes the runs here are created with: a join narrows them."""
Params = list[tuple[str, str]]

FORMS: list[tuple[Params, set[str]]] = [
    ([("stream_mode", '["updates","custom"]')], {"updates", "custom"}),
    ([("stream_mode", '["updates"]')], {"updates"}),
    ([("stream_mode", "updates"), ("stream_mode", "custom")], {"updates", "custom"}),
    ([("stream_mode", "custom")], {"custom"}),
    ([("stream_mode", '["values"]'), ("stream_mode", "custom")], {"values", "custom"}),
    ([("stream_mode", '["custom","custom"]'), ("stream_mode", "custom")], {"custom"}),
    ([("stream_mode", "")], set(RUN_MODES)),
    ([("stream_mode", "[]")], set(RUN_MODES)),
    ([], set(RUN_MODES)),
]
"""Query parameters and the modes of the events a join with them streams."""

REFUSED: list[tuple[Params, str]] = [
    ([("stream_mode", "telepathy")], "'telepathy' is not supported"),
    ([("stream_mode", '["updates","telepathy"]')], "'telepathy' is not supported"),
    ([("stream_mode", "updates"), ("stream_mode", "telepathy")], "'telepathy' is not supported"),
    ([("stream_mode", '["debug"]')], "'debug' is not supported"),
    ([("stream_mode", '" updates"')], "is not supported"),
    ([("stream_mode", "[")], "not a JSON array"),
    ([("stream_mode", '["updates"')], "not a JSON array"),
    ([("stream_mode", '["updates",]')], "not a JSON array"),
    ([("stream_mode", "[" * 2000)], "not a JSON array"),
    ([("stream_mode", '["\\ud800"]')], "not a JSON array"),
    ([("stream_mode", "[1]")], "holds a number"),
    ([("stream_mode", "[null]")], "holds null"),
    ([("stream_mode", '[["updates"]]')], "holds an array"),
    ([("stream_mode", '[{"mode": "updates"}]')], "holds an object"),
    ([("stream_mode", json.dumps(["updates"] * 100))], f"more than {MAX_QUERY_MODES} modes"),
    ([("stream_mode", "updates")] * 100, f"more than {MAX_QUERY_MODES} modes"),
    ([("stream_mode", "[]")] * 100, f"more than {MAX_QUERY_MODES} modes"),
]
"""Query parameters a join refuses (422), and what its message says."""


async def streamed_modes(http: httpx.AsyncClient, path: str, params: Params) -> set[str]:
    """The modes of the events a join with ``params`` replays (``Last-Event-ID: -1``)."""
    headers = {"Last-Event-ID": "-1"}
    async with http.stream("GET", path, params=params, headers=headers) as response:
        assert response.status_code == 200, (await response.aread(), params)
        events = await read_events(response)
    assert events[0].event == "metadata" and events[-1].event == "end", events
    return {str(e.event) for e in events[1:-1]}


@pytest.fixture(scope="module")
def finished_run(server: ServerProcess) -> tuple[str, str]:
    """A thread and its finished run, streamed in ``RUN_MODES``: (thread id, run id)."""
    with httpx.Client(base_url=server.url, timeout=60) as http:
        tid = http.post("/threads", json={}).json()["thread_id"]
        body = {"assistant_id": "agent", "input": counter(2), "stream_mode": RUN_MODES}
        response = http.post(f"/threads/{tid}/runs", json=body)
        assert response.status_code == 200, response.text
        rid = response.json()["run_id"]
        assert http.get(f"/threads/{tid}/runs/{rid}/join").status_code == 200
        assert http.get(f"/threads/{tid}/runs/{rid}").json()["status"] == "success"
        return str(tid), str(rid)


@pytest.mark.parametrize(("params", "modes"), FORMS)
async def test_a_run_join_reads_every_form(
    http: httpx.AsyncClient, finished_run: tuple[str, str], params: Params, modes: set[str]
) -> None:
    tid, rid = finished_run
    assert await streamed_modes(http, f"/threads/{tid}/runs/{rid}/stream", params) == modes
    assert await streamed_modes(http, f"/runs/{rid}/stream", params) == modes


async def test_a_thread_join_reads_a_json_array(http: httpx.AsyncClient) -> None:
    """``GET /threads/{id}/stream`` (the JS SDK's ``threads.joinStream``) narrows the same way."""
    tid = await new_thread(http)
    body = {"assistant_id": "agent", "input": counter(3, 0.4), "stream_mode": RUN_MODES}
    response = await http.post(f"/threads/{tid}/runs", json=body)
    assert response.status_code == 200, response.text
    forms = FORMS[:4]  # joined together, while the run is active
    joined = await asyncio.gather(
        *(streamed_modes(http, f"/threads/{tid}/stream", params) for params, _ in forms)
    )
    assert joined == [modes for _, modes in forms]
    await wait_status(http, tid, response.json()["run_id"], "success")


@pytest.mark.parametrize(("params", "says"), REFUSED)
async def test_a_malformed_stream_mode_is_a_422_that_says_why(
    http: httpx.AsyncClient, finished_run: tuple[str, str], params: Params, says: str
) -> None:
    tid, rid = finished_run
    for path in (
        f"/threads/{tid}/runs/{rid}/stream",
        f"/runs/{rid}/stream",
        f"/threads/{tid}/stream",
    ):
        detail = expect(await http.get(path, params=params), 422, "stream_mode", says)
        assert len(detail) < 400, detail  # a long value is cut, not echoed whole
