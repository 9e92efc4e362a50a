"""Logs about a run carry its ``run_id``, ``thread_id`` and ``attempt``: from a real server
(``THREADLINE_LOG_FORMAT=json``, every line a JSON object) running a graph that logs from its
nodes, a task they start and a worker thread, one run that fails and one taken over after a
``kill -9``; and the text format, in-process."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.platform.logs import bind_run, handler, run_context
from tests.utils.runs import new_thread, wait_status
from tests.utils.server import ServerProcess

NOISY_GRAPH = textwrap.dedent(
    '''
    """Logs from an async node, a task it starts, and a sync node (run in a worker thread)."""
    import asyncio
    import logging
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    log = logging.getLogger("noisy")


    class State(TypedDict, total=False):
        fail: bool
        slow: bool
        done: list[str]


    async def work(state: State) -> State:
        log.warning("working")

        async def child() -> None:
            log.warning("child task working")

        await asyncio.create_task(child())
        if state.get("slow"):
            await asyncio.sleep(3)
        return {"done": ["work"]}


    def check(state: State) -> State:
        if state.get("fail"):
            raise RuntimeError("the check failed on purpose")
        log.warning("checked")
        return {"done": ["work", "check"]}


    builder = StateGraph(State)
    builder.add_node("work", work)
    builder.add_node("check", check)
    builder.add_edge(START, "work")
    builder.add_edge("work", "check")
    builder.add_edge("check", END)
    '''
)


def noisy_config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "noisy.py").write_text(NOISY_GRAPH)
    config = directory / "langgraph.json"
    config.write_text('{"graphs": {"noisy": "./noisy.py:builder"}}')
    return config


def json_lines(server: ServerProcess) -> list[dict[str, Any]]:
    """Every line the server wrote (its log file), each parsed as JSON; the harness's own
    ``=== start`` markers aside."""
    out = []
    for line in server.log_path.read_text().splitlines():
        if not line.strip() or line.startswith("=== start #"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            pytest.fail(f"a log line that is not JSON: {line!r}")
        assert isinstance(record, dict), line
        assert {"timestamp", "level", "logger", "message"} <= record.keys(), line
        out.append(record)
    return out


async def lines_until(
    server: ServerProcess, found: Callable[[list[dict[str, Any]]], bool], timeout: float = 20.0
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        lines = json_lines(server)
        if found(lines):
            return lines
        assert time.monotonic() < deadline, server.log_tail()
        await asyncio.sleep(0.05)


def about(lines: list[dict[str, Any]], message: str, run_id: str) -> list[dict[str, Any]]:
    return [r for r in lines if r["message"] == message and r.get("run_id") == run_id]


async def start(http: httpx.AsyncClient, values: dict[str, Any]) -> tuple[str, str]:
    tid = await new_thread(http)
    response = await http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "noisy", "input": values}
    )
    assert response.status_code == 200, response.text
    return tid, response.json()["run_id"]


@pytest.mark.slow
async def test_json_lines_about_a_run_carry_its_run_thread_and_attempt(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    server = make_server(
        database_url,
        tmp_path / "data",
        config=noisy_config(tmp_path / "project"),
        env={"THREADLINE_LOG_FORMAT": "json"},
        name="json",
    )
    server.start()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        ok_thread, ok_run = await start(http, {"fail": False})
        await wait_status(http, ok_thread, ok_run, "success")
        bad_thread, bad_run = await start(http, {"fail": True})
        await wait_status(http, bad_thread, bad_run, "error")
        slow_thread, slow_run = await start(http, {"slow": True})
        await lines_until(server, lambda lines: bool(about(lines, "working", slow_run)))
    server.restart()  # SIGKILL while ``work`` sleeps: the next process takes the run over
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        await wait_status(http, slow_thread, slow_run, "success", timeout=60)
    lines = await lines_until(server, lambda lines: bool(about(lines, "checked", slow_run)))

    fields = {"run_id": ok_run, "thread_id": ok_thread, "attempt": 1}
    for message in ("working", "child task working", "checked"):
        (line,) = about(lines, message, ok_run)
        assert {k: line[k] for k in fields} == fields, line
        assert line["logger"] == "noisy" and line["level"] == "WARNING"
    (failed,) = about(lines, f"run {bad_run} failed", bad_run)
    assert failed["thread_id"] == bad_thread and failed["attempt"] == 1
    assert failed["level"] == "ERROR" and failed["logger"] == "api.engine.execution"
    assert "RuntimeError: the check failed on purpose" in failed["exception"]
    # The takeover's lines name its second attempt.
    assert [r["attempt"] for r in about(lines, "working", slow_run)] == [1, 2]
    assert [r["attempt"] for r in about(lines, "checked", slow_run)] == [2]
    assert {r["thread_id"] for r in lines if r.get("run_id") == slow_run} == {slow_thread}
    # Lines about no run carry no run fields; uvicorn's own lines are JSON too.
    (ready, *_) = [r for r in lines if r["message"].startswith("threadline ready")]
    assert "run_id" not in ready and "attempt" not in ready
    assert any(r["logger"].startswith("uvicorn") for r in lines)


@pytest.fixture
def text_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    out = handler("text")
    assert isinstance(out, logging.StreamHandler)
    out.setStream(stream)
    log = logging.getLogger("tests.logging.text")
    log.addHandler(out)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield log, stream
    finally:
        log.removeHandler(out)
        log.propagate = True


def test_text_lines_append_the_run_fields(text_log: tuple[logging.Logger, io.StringIO]) -> None:
    log, stream = text_log

    async def attempt() -> None:
        bind_run("r-1", "t-1", 3)  # as the worker does, in the attempt's own task
        log.info("inside")

        async def child() -> None:
            log.info("in a task it started")

        await asyncio.create_task(child())
        await asyncio.to_thread(log.info, "in a worker thread")

    log.info("before")
    asyncio.run(attempt())
    log.info("after")  # the attempt's context stayed in its task
    with run_context("r-1", "t-1", 4):
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    suffix = " run_id=r-1 thread_id=t-1 attempt=3"
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("INFO tests.logging.text: before")
    assert lines[1].endswith("inside" + suffix)
    assert lines[2].endswith("in a task it started" + suffix)
    assert lines[3].endswith("in a worker thread" + suffix)
    assert lines[4].endswith("after")
    # Fields after the message, before the traceback.
    assert lines[5].endswith("failed run_id=r-1 thread_id=t-1 attempt=4")
    assert lines[6] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: boom"
