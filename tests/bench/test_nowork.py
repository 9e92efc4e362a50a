"""The benchmark's no-work graph: its shape, and one level of ``python -m bench`` on it (the
floor in this process, then ``threadline serve`` with the graph from a ``langgraph.json``, runs
started both ways), as the benchmark itself runs it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
from langgraph.checkpoint.memory import InMemorySaver

from bench import cli, nowork, pg, report, throughput, workloads
from bench.lgdev import find


async def test_the_graph_has_the_issue_shape() -> None:
    """12 supersteps (agent, 5 parallel tool tasks, 4 agent/tool rounds, agent, verify) and 19
    chunks with ``updates`` + ``custom``, the state checkpointed at every step."""
    graph = nowork.builder().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    chunks = [
        c
        async for c in graph.astream(
            nowork.INPUT, config, stream_mode=["updates", "custom"], durability="sync"
        )
    ]
    assert len(chunks) == nowork.EVENTS == 19
    updates = [next(iter(c)) for mode, c in chunks if mode == "updates"]
    assert updates.count("agent") == 6 and updates.count("tools") == 9
    assert updates[1:6] == ["tools"] * 5 and updates[-1] == "verify"
    assert [c for mode, c in chunks if mode == "custom"][-1] == {"type": "verify", "passed": True}
    steps = [s.metadata["step"] async for s in graph.aget_state_history(config)]
    assert max(steps) == nowork.SUPERSTEPS == 12 and min(steps) == -1


def test_one_level_on_the_floor_and_the_service(
    pg_admin_url: str, tmp_path: Path, clean_env: None
) -> None:
    args = cli.parser().parse_args(
        [
            *("--graph", "nowork", "--runs-per-level", "4", "--pool-size", "8"),
            *("--langgraph-dev", "off", "--pg-url", pg_admin_url, "--timeout", "60"),
        ]
    )
    names = {"direct": pg.new_name("bench_test"), "service": pg.new_name("bench_test")}
    urls: dict[str, str] = {}
    try:
        for mode, name in names.items():
            urls[mode] = pg.create_database(pg_admin_url, name)
        with asyncio.Runner() as runner:
            ctx = throughput.Context(
                runner=runner,
                args=args,
                warmup=0,
                workers=4,
                urls=urls,
                names=names,
                tmp=tmp_path,
                server_log=tmp_path / "server.log",
                config=workloads.write_config(tmp_path / "graphs"),
                lgdev=None,
                settle_s=0.1,
            )
            level = throughput.level(ctx, workloads.make("nowork"), 2)
        stored = {mode: checkpoints(url) for mode, url in urls.items()}
    finally:
        for name in names.values():
            pg.drop_database(pg_admin_url, name)

    for mode in ("direct", "service", "service_create"):
        r = level[mode]
        assert (r["runs"], r["errors"]) == (4, 0), r["error_samples"]
        assert r["steps_per_run"] == nowork.SUPERSTEPS
        assert r["ttfe_p50_ms"] is not None and r["latency_p50_ms"] >= r["ttfe_p50_ms"]
    # Counted from the run's own request: after POST /threads when the thread came first, so
    # earlier than from the first request; the same moment when one request does both.
    assert 0 < level["service"]["ttfe_run_p50_ms"] < level["service"]["ttfe_p50_ms"]
    assert level["service_create"]["ttfe_run_p50_ms"] == level["service_create"]["ttfe_p50_ms"]
    assert level["direct"]["ttfe_run_p50_ms"] == level["direct"]["ttfe_p50_ms"]
    assert level["direct"]["events_per_run"] == nowork.EVENTS
    # The service's stream: metadata, the graph's 19 events, end.
    assert level["service"]["events_per_run"] == nowork.EVENTS + 2
    assert level["service_create"]["events_per_run"] == nowork.EVENTS + 2
    assert level["service"]["form"] == "threads" and level["service_create"]["form"] == "create"
    # Every run stored its checkpoints on its own thread: 14 each (steps -1..12); the floor ran 4
    # runs, the service 4 for each form.
    per_thread = nowork.SUPERSTEPS + 2
    assert stored == {"direct": (4, 4 * per_thread), "service": (8, 8 * per_thread)}
    assert level["direct"]["db_xacts_per_run"] > 0
    assert set(level["ratios_by_mode"]) == {"service", "service_create"}
    assert all(q["throughput"] and q["latency_p50"] for q in level["ratios_by_mode"].values())

    meta = {"n": 5, "delay": 0.0, "cpus": 2, "langgraph_dev": "skipped", "floor_saver": "pooled"}
    text = "\n".join(report.throughput_markdown({"meta": meta}, "nowork", [level]))
    assert "| 2 | threadline 1 req | 4 | 0 |" in text
    assert "langgraph dev: skipped." in text


def checkpoints(url: str) -> tuple[int, int]:
    """Threads and checkpoints stored in LangGraph's ``checkpoints`` table."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(DISTINCT thread_id), count(*) FROM checkpoints").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_langgraph_dev_missing_is_said(tmp_path: Path) -> None:
    assert find("off") == (None, "skipped (--langgraph-dev off)")
    exe, why = find(str(tmp_path / "nowhere"))
    assert exe is None and why.startswith("not installed")
