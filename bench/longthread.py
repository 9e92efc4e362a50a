"""A long thread: ``runs`` runs of the chat graph (``bench/chat.py``, 12 messages a run) on one
thread, through the service and on the floor (the same graph compiled with LangGraph's stock
``AsyncPostgresSaver``, in this process, on the same PostgreSQL), one after the other in one
invocation, each on a database of its own.

Measured on each side:

- every run's latency (the service: ``POST /threads/{id}/runs/stream`` read to ``end``, with
  ``stream_mode=["updates"]``; the floor: ``astream`` of the same modes, ``durability="sync"``);
- a state read (``GET /threads/{id}/state`` / ``aget_state``) and a history page of 10
  (``POST /threads/{id}/history`` / ``aget_state_history(limit=10)``), after the first
  ``EARLY`` runs and after the last, median of ``READS`` each.

Reported: the median run of the first and of the last ``EARLY`` runs, growth (last ÷ first) and
the service ÷ floor ratio of each, so a run, a state read and a history page on a long thread
can be held to the floor's. ``python -m bench.longthread --runs 400`` prints and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from bench import chat, pg
from bench.service import Server

EARLY = 10
"""Runs whose median is "the start" (and, at the end, "the end")."""
READS = 5
STREAM_MODES = ["updates"]


async def _median_ms(call: Callable[[], Awaitable[Any]], times: int = READS) -> float:
    taken = []
    for _ in range(times):
        t0 = time.perf_counter()
        await call()
        taken.append((time.perf_counter() - t0) * 1000)
    return statistics.median(taken)


def _summary(runs_ms: list[float], reads: dict[str, float]) -> dict[str, Any]:
    first = statistics.median(runs_ms[:EARLY])
    last = statistics.median(runs_ms[-EARLY:])
    return {
        "runs": len(runs_ms),
        "run_first_ms": round(first, 1),
        "run_last_ms": round(last, 1),
        "run_growth": round(last / first, 2),
        **{k: round(v, 1) for k, v in reads.items()},
        "state_growth": round(reads["state_last_ms"] / reads["state_first_ms"], 2),
        "history_growth": round(reads["history_last_ms"] / reads["history_first_ms"], 2),
    }


async def floor(url: str, runs: int, delta: bool = False) -> dict[str, Any]:
    """LangGraph alone: the chat graph on ``AsyncPostgresSaver``, one thread, in this process."""
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        graph = chat.builder(delta).compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4())}}
        reads: dict[str, float] = {}

        async def state() -> None:
            await graph.aget_state(config)

        async def history() -> None:
            [s async for s in graph.aget_state_history(config, limit=10)]

        taken: list[float] = []
        for turn in range(runs):
            t0 = time.perf_counter()
            async for _ in graph.astream(  # type: ignore[call-overload]
                chat.run_input(turn), config, stream_mode=STREAM_MODES, durability="sync"
            ):
                pass
            taken.append((time.perf_counter() - t0) * 1000)
            if turn + 1 == EARLY:
                reads["state_first_ms"] = await _median_ms(state)
                reads["history_first_ms"] = await _median_ms(history)
        reads["state_last_ms"] = await _median_ms(state)
        reads["history_last_ms"] = await _median_ms(history)
        messages = len((await graph.aget_state(config)).values["messages"])
    return {**_summary(taken, reads), "messages": messages}


def write_config(directory: Path) -> Path:
    """A ``langgraph.json`` serving the chat graph, with a copy of ``bench/chat.py``."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(chat.__file__), directory / "chat.py")
    config = directory / "langgraph.json"
    graphs = {chat.GRAPH_ID: "./chat.py:graph", chat.DELTA_GRAPH_ID: "./chat.py:delta_graph"}
    config.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    return config


async def _one_run(
    http: httpx.AsyncClient, thread_id: str, turn: int, graph_id: str = chat.GRAPH_ID
) -> None:
    body = {
        "assistant_id": graph_id,
        "input": chat.run_input(turn),
        "stream_mode": STREAM_MODES,
    }
    async with http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {(await resp.aread())[:300]!r}")
        ended = False
        async for line in resp.aiter_lines():
            if line == "event: end":
                ended = True
        if not ended:
            raise RuntimeError("the stream ended without its end event")


async def service(base_url: str, runs: int, delta: bool = False) -> dict[str, Any]:
    """The same runs through a running server, over HTTP and SSE."""
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as http:
        thread_id = (await http.post("/threads", json={})).json()["thread_id"]
        reads: dict[str, float] = {}

        async def state() -> None:
            (await http.get(f"/threads/{thread_id}/state")).raise_for_status()

        async def history() -> None:
            (
                await http.post(f"/threads/{thread_id}/history", json={"limit": 10})
            ).raise_for_status()

        taken: list[float] = []
        for turn in range(runs):
            t0 = time.perf_counter()
            await _one_run(http, thread_id, turn, chat.DELTA_GRAPH_ID if delta else chat.GRAPH_ID)
            taken.append((time.perf_counter() - t0) * 1000)
            if turn + 1 == EARLY:
                reads["state_first_ms"] = await _median_ms(state)
                reads["history_first_ms"] = await _median_ms(history)
        reads["state_last_ms"] = await _median_ms(state)
        reads["history_last_ms"] = await _median_ms(history)
        values = (await http.get(f"/threads/{thread_id}/state")).json()["values"]
    return {**_summary(taken, reads), "messages": len(values["messages"])}


def ratios(svc: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    keys = ("run_first_ms", "run_last_ms", "state_last_ms", "history_last_ms")
    return {k.removesuffix("_ms"): round(svc[k] / base[k], 2) for k in keys}


def measure(
    runner: asyncio.Runner, pg_url: str, runs: int, tmp: Path, delta: bool = False
) -> dict[str, Any]:
    """Both sides, each on a new database of its own (dropped after): the results ``main``
    prints and ``python -m bench --only longthread`` reports. ``delta``: the graph whose
    ``messages`` is a ``DeltaChannel`` (``chat.delta_graph``)."""
    names = {"floor": pg.new_name("bench"), "service": pg.new_name("bench")}
    results: dict[str, Any] = {
        "runs": runs,
        "messages_per_run": chat.MESSAGES_PER_RUN,
        "channel": "DeltaChannel" if delta else "add_messages",
    }
    try:
        url = pg.create_database(pg_url, names["floor"])
        results["floor"] = runner.run(floor(url, runs, delta))
        url = pg.create_database(pg_url, names["service"])
        server = Server(
            url=url,
            data_dir=tmp / "longthread-data",
            workers=None,
            pool_size=10,
            log_path=tmp / "longthread-server.log",
            extra_env={"THREADLINE_CONFIG": str(write_config(tmp / "longthread-project"))},
        )
        with server:
            results["service"] = runner.run(service(server.base_url, runs, delta))
        results["service_over_floor"] = ratios(results["service"], results["floor"])
    finally:
        for name in names.values():
            pg.drop_database(pg_url, name)
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.longthread", description=__doc__)
    p.add_argument("--runs", type=int, default=400, help="runs on the one thread (default 400)")
    p.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--out", type=Path, help="write the results here as JSON")
    p.add_argument("--delta", action="store_true", help="the graph with a DeltaChannel list")
    args = p.parse_args(argv)
    if args.runs < 2 * EARLY:
        p.error(f"--runs must be at least {2 * EARLY}")
    tmp = Path(tempfile.mkdtemp(prefix="threadline-longthread-"))
    try:
        with asyncio.Runner() as runner:
            results = measure(runner, args.pg_url, args.runs, tmp, args.delta)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
