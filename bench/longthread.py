"""A long thread: ``runs`` runs on one thread, through the service and on the floor (the same
graph compiled with LangGraph's stock ``AsyncPostgresSaver``, in this process, on the same
PostgreSQL), one after the other in one invocation, each on a database of its own. Workloads
(``WORKLOADS``):

- ``chat``: the chat graph (``bench/chat.py``, 12 messages a run, no work in its nodes) with
  ``messages`` an ``add_messages`` list; ``chat_delta``: the same with a ``DeltaChannel``;
- ``agent``: the built-in agent, a ``counter`` task a run (``bench/longthread_agent.py``).

Measured on each side:

- every run's latency (the service: ``POST /threads/{id}/runs/stream`` read to ``end``, which
  must say ``success``; the floor: ``astream`` of the same stream modes, ``durability="sync"``);
- a state read (``GET /threads/{id}/state`` / ``aget_state``) and a history page of 10
  (``POST /threads/{id}/history`` / ``aget_state_history(limit=10)``), after the first
  ``EARLY`` runs and after the last, median of ``READS`` each.

Reported per workload: the median run of the first and of the last ``EARLY`` runs, growth (last
÷ first) and the service ÷ floor ratio of each, so a run, a state read and a history page on a
long thread can be held to the floor's. ``python -m bench.longthread --runs 400`` prints and
writes JSON.
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
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from bench import chat, pg
from bench.longthread_workloads import GRAPHS, WORKLOADS, Tally, Workload, chosen
from bench.service import Server

__all__ = ["EARLY", "GRAPHS", "WORKLOADS", "chosen", "floor", "measure", "service"]

EARLY = 10
"""Runs whose median is "the start" (and, at the end, "the end")."""
READS = 5


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


async def _measured(
    runs: int,
    one_run: Callable[[int], Awaitable[None]],
    state: Callable[[], Awaitable[Any]],
    history: Callable[[], Awaitable[Any]],
) -> dict[str, Any]:
    """``runs`` runs one after the other, the reads after the first ``EARLY`` and at the end."""
    reads: dict[str, float] = {}
    taken: list[float] = []
    for turn in range(runs):
        t0 = time.perf_counter()
        await one_run(turn)
        taken.append((time.perf_counter() - t0) * 1000)
        if turn + 1 == EARLY:
            reads["state_first_ms"] = await _median_ms(state)
            reads["history_first_ms"] = await _median_ms(history)
    reads["state_last_ms"] = await _median_ms(state)
    reads["history_last_ms"] = await _median_ms(history)
    return _summary(taken, reads)


async def floor(url: str, runs: int, work: Workload, data_dir: Path) -> dict[str, Any]:
    """LangGraph alone: the workload's graph on ``AsyncPostgresSaver``, one thread, in process."""
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        graph, extra = work.compile(saver, url, data_dir)
        config: RunnableConfig = {**extra, "configurable": {"thread_id": str(uuid.uuid4())}}
        tally = Tally()

        async def one_run(turn: int) -> None:
            async for chunk in graph.astream(
                work.run_input(turn), config, stream_mode=work.stream_modes, durability="sync"
            ):
                if chunk[0] == "custom":
                    tally.custom(chunk[1])
            tally.end_run()

        async def history() -> None:
            [s async for s in graph.aget_state_history(config, limit=10)]

        out = await _measured(runs, one_run, lambda: graph.aget_state(config), history)
        messages = len((await graph.aget_state(config)).values["messages"])
    return {**out, "messages": messages, **tally.as_dict(work)}


def write_config(directory: Path) -> Path:
    """A ``langgraph.json`` serving the chat graph, with a copy of ``bench/chat.py`` (the
    server serves the built-in agent beside it)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(chat.__file__), directory / "chat.py")
    config = directory / "langgraph.json"
    graphs = {chat.GRAPH_ID: "./chat.py:graph", chat.DELTA_GRAPH_ID: "./chat.py:delta_graph"}
    config.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    return config


async def _one_run(
    http: httpx.AsyncClient, thread_id: str, turn: int, work: Workload, tally: Tally
) -> None:
    body = {
        "assistant_id": work.graph_id,
        "input": work.run_input(turn),
        "stream_mode": work.stream_modes,
    }
    status: str | None = None
    event: str | None = None
    async with http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {(await resp.aread())[:300]!r}")
        async for line in resp.aiter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event in ("end", "custom"):
                data = json.loads(line.removeprefix("data: "))
                if event == "end":
                    status = data.get("status")
                else:
                    tally.custom(data)
    if status != "success":
        raise RuntimeError(f"run {turn} on thread {thread_id} ended {status or 'without end'}")
    tally.end_run()


async def service(base_url: str, runs: int, work: Workload) -> dict[str, Any]:
    """The same runs through a running server, over HTTP and SSE."""
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as http:
        thread_id = (await http.post("/threads", json={})).json()["thread_id"]
        tally = Tally()

        async def state() -> None:
            (await http.get(f"/threads/{thread_id}/state")).raise_for_status()

        async def history() -> None:
            (
                await http.post(f"/threads/{thread_id}/history", json={"limit": 10})
            ).raise_for_status()

        async def one_run(turn: int) -> None:
            await _one_run(http, thread_id, turn, work, tally)

        out = await _measured(runs, one_run, state, history)
        values = (await http.get(f"/threads/{thread_id}/state")).json()["values"]
    return {**out, "messages": len(values["messages"]), **tally.as_dict(work)}


def ratios(svc: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    keys = ("run_first_ms", "run_last_ms", "state_last_ms", "history_last_ms")
    return {k.removesuffix("_ms"): round(svc[k] / base[k], 2) for k in keys}


def measure_one(
    runner: asyncio.Runner, pg_url: str, runs: int, tmp: Path, work: Workload
) -> dict[str, Any]:
    """One workload, both sides, each on a new database of its own (dropped after)."""
    names = {"floor": pg.new_name("bench"), "service": pg.new_name("bench")}
    results: dict[str, Any] = {
        "graph": work.graph_id,
        "channel": work.channel,
        "messages_per_run": work.messages_per_run,
    }
    try:
        url = pg.create_database(pg_url, names["floor"])
        results["floor"] = runner.run(floor(url, runs, work, tmp / f"longthread-{work.name}-floor"))
        url = pg.create_database(pg_url, names["service"])
        server = Server(
            url=url,
            data_dir=tmp / f"longthread-{work.name}-data",
            workers=None,
            pool_size=10,
            log_path=tmp / f"longthread-{work.name}-server.log",
            extra_env={"THREADLINE_CONFIG": str(write_config(tmp / "longthread-project"))},
        )
        with server:
            results["service"] = runner.run(service(server.base_url, runs, work))
        results["service_over_floor"] = ratios(results["service"], results["floor"])
    finally:
        for name in names.values():
            pg.drop_database(pg_url, name)
    return results


def measure(
    runner: asyncio.Runner,
    pg_url: str,
    runs: int,
    tmp: Path,
    workloads: Sequence[str] = GRAPHS,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Each of ``workloads`` (names in ``WORKLOADS``, default the chat graph and the agent) in
    turn, floor then service: the results ``main`` prints and ``python -m bench --only
    longthread`` reports."""
    results: dict[str, Any] = {"runs": runs, "early": EARLY, "reads": READS, "workloads": {}}
    for name in workloads:
        if say:
            say(f"  long thread: {runs} runs of {name}, floor then service")
        results["workloads"][name] = measure_one(runner, pg_url, runs, tmp, WORKLOADS[name])
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.longthread", description=__doc__)
    p.add_argument("--runs", type=int, default=400, help="runs on the one thread (default 400)")
    p.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--out", type=Path, help="write the results here as JSON")
    p.add_argument(
        "--graph",
        choices=(*GRAPHS, "both"),
        default="both",
        help="the chat graph, the built-in agent, or both (default)",
    )
    p.add_argument(
        "--delta", action="store_true", help="also the chat graph with a DeltaChannel list"
    )
    args = p.parse_args(argv)
    if args.runs < 2 * EARLY:
        p.error(f"--runs must be at least {2 * EARLY}")
    from bench.cli import scrub_environment

    scrub_environment()  # the floor's agent reads its settings from here, as the server does
    tmp = Path(tempfile.mkdtemp(prefix="threadline-longthread-"))
    try:
        with asyncio.Runner() as runner:
            results = measure(runner, args.pg_url, args.runs, tmp, chosen(args.graph, args.delta))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
