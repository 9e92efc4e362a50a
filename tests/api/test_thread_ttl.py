"""Threads' time-to-live (``api.runs.thread_ttl``): a project's ``"checkpointer": {"ttl": ...}`` and
the SDK's per-thread ``ttl``, against a real server of a project folder. A thread not updated
for its TTL is deleted with everything of it; one with an active run is not; a thread with a
longer TTL, or made before the config (no TTL), is kept; ``keep_latest`` keeps the thread and
drops its older checkpoints. Two sweepers never take the same thread."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk.errors import NotFoundError

from api.engine.runtime import Runtime
from api.platform.database import connection_kwargs
from api.project.graphs import GraphConfigError
from api.runs.thread_ttl import read_ttl
from api.store import runs, thread_ttl, threads
from tests.api.conftest import FAST
from tests.utils.runs import sdk_client
from tests.utils.server import ServerProcess, serving

GRAPH_PY = textwrap.dedent(
    """
    import asyncio
    from pathlib import Path
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    GATE = Path(__file__).parent / "release"


    class State(TypedDict, total=False):
        n: int
        hold: bool


    async def step(state: State) -> State:
        while state.get("hold") and not GATE.exists():  # held until the test releases it
            await asyncio.sleep(0.05)
        return {"n": state.get("n", 0) + 1, "hold": False}


    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    graph = builder.compile()
    """
)
DEFAULT_TTL = 0.02
"""Minutes (1.2 s): LangGraph's parser takes fractional minutes."""
TTL = {"strategy": "delete", "default_ttl": DEFAULT_TTL, "sweep_interval_minutes": 1}
ACTIVE = ("pending", "running")
SWEEP = {"THREADLINE_TTL_SWEEP_SECONDS": "0.2"}
"""The config's interval is whole minutes; the setting makes it a fifth of a second."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ttl") / "project"
    root.mkdir()
    (root / "graph.py").write_text(GRAPH_PY)
    config = {"graphs": {"step": "./graph.py:graph"}, "checkpointer": {"ttl": TTL}}
    (root / "langgraph.json").write_text(json.dumps(config))
    return root


@pytest.fixture(scope="module")
def ttl_server(module_database_url: str, project: Path) -> Iterator[ServerProcess]:
    data = project.parent / "data"
    config = project / "langgraph.json"
    proc = ServerProcess(module_database_url, data, config=config, env=SWEEP, name="ttl", **FAST)
    with serving(proc):
        yield proc


async def gone(client: Any, thread_id: str, timeout: float = 30.0) -> None:
    """Wait until the thread is no longer found."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await client.threads.get(thread_id)
        except NotFoundError:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"thread {thread_id} was not swept within {timeout} s")


async def a_sweep_after(client: Any, moment: datetime) -> None:
    """Wait for a sweep that ran after ``moment``: a thread whose 0.06 s TTL starts after it
    was swept (a sweep reads ``now()`` once per batch)."""
    await asyncio.sleep(max(0.0, (moment - datetime.now(moment.tzinfo)).total_seconds()) + 0.05)
    sentinel = await client.threads.create(ttl={"strategy": "delete", "ttl": 0.001})
    await gone(client, sentinel["thread_id"])


async def rows_of(database_url: str, thread_id: str, run_ids: list[str]) -> dict[str, int]:
    """How many rows the thread still has in each table (its runs' events by run id)."""
    counts = {}
    async with await psycopg.AsyncConnection.connect(database_url, **connection_kwargs()) as conn:
        for table in ("threads", "runs", "checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            cur = await conn.execute(
                f"SELECT count(*) AS n FROM {table} WHERE thread_id = %s", (thread_id,)
            )
            counts[table] = (await cur.fetchone())["n"]
        cur = await conn.execute(
            "SELECT count(*) AS n FROM run_events WHERE run_id = ANY(%s::uuid[])", (run_ids,)
        )
        counts["run_events"] = (await cur.fetchone())["n"]
    return counts


async def test_a_thread_past_its_ttl_is_deleted_with_everything_of_it(
    ttl_server: ServerProcess, module_database_url: str
) -> None:
    async with sdk_client(ttl_server.url) as client:
        thread = await client.threads.create()
        thread_id = thread["thread_id"]
        assert await client.runs.wait(thread_id, "step", input={}) == {"n": 1, "hold": False}
        run_ids = [r["run_id"] for r in await client.runs.list(thread_id)]
        # What it had, before it went: the sweep only deletes what exists.
        before = await rows_of(module_database_url, thread_id, run_ids)
        assert min(before.values()) > 0, before
        await gone(client, thread_id)
    assert set((await rows_of(module_database_url, thread_id, run_ids)).values()) == {0}


async def test_the_default_and_a_threads_own_ttl_are_shown(ttl_server: ServerProcess) -> None:
    async with sdk_client(ttl_server.url) as client:
        thread = await client.threads.create(ttl=60)
        shown = await client.threads.get(thread["thread_id"], include=["ttl"])
        assert shown["ttl"]["strategy"] == "delete" and shown["ttl"]["ttl_minutes"] == 60
        expires = datetime.fromisoformat(shown["ttl"]["expires_at"])
        assert (expires - datetime.fromisoformat(shown["updated_at"])).total_seconds() == 3600
        assert "ttl" not in await client.threads.get(thread["thread_id"])  # only when asked
        # A thread a run makes gets the config's default, as one POST /threads makes does.
        made = str(uuid.uuid4())
        await client.runs.create(made, "step", input={"hold": False}, if_not_exists="create")
        ttl = (await client.threads.get(made, include=["ttl"]))["ttl"]
        assert (ttl["strategy"], ttl["ttl_minutes"]) == ("delete", DEFAULT_TTL)


async def test_a_thread_with_an_active_run_is_kept_until_it_ends(
    ttl_server: ServerProcess, project: Path
) -> None:
    async with sdk_client(ttl_server.url) as client:
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "step", input={"hold": True})
        thread = await client.threads.get(thread_id, include=["ttl"])
        await a_sweep_after(client, datetime.fromisoformat(thread["ttl"]["expires_at"]))
        # Past its TTL, swept over: kept, its run still going.
        assert (await client.threads.get(thread_id))["status"] == "busy"
        assert (await client.runs.get(thread_id, run["run_id"]))["status"] in ACTIVE
        (project / "release").touch()
        assert (await client.runs.join(thread_id, run["run_id"])) == {"n": 1, "hold": False}
        await gone(client, thread_id)  # its TTL counts again from the run's end


async def test_a_longer_ttl_or_none_keeps_a_thread(
    ttl_server: ServerProcess,
    module_database_url: str,
    tmp_path: Path,
    make_server: Callable[..., ServerProcess],
) -> None:
    """A thread with a TTL of its own (at creation, or set again by a patch), and one made by
    a server without the config (a replica without it, or before it: no TTL), outlive the
    default TTL."""
    plain = make_server(module_database_url, tmp_path / "data", name="plain")
    await asyncio.to_thread(plain.start)
    async with sdk_client(plain.url) as client:
        older = (await client.threads.create())["thread_id"]
        assert "ttl" not in await client.threads.get(older, include=["ttl"])
    async with sdk_client(ttl_server.url) as client:
        own = (await client.threads.create(ttl={"strategy": "delete", "ttl": 60}))["thread_id"]
        patched = (await client.threads.create())["thread_id"]
        await client.threads.update(patched, metadata={}, ttl=60)
        assert (await client.threads.get(patched, include=["ttl"]))["ttl"]["ttl_minutes"] == 60
        # Made after them with the default TTL: once it is swept, so would they have been.
        swept = (await client.threads.create())["thread_id"]
        await gone(client, swept)
        for thread_id in (older, own, patched):
            assert (await client.threads.get(thread_id))["thread_id"] == thread_id


async def test_keep_latest_keeps_the_thread_and_its_state(ttl_server: ServerProcess) -> None:
    async with sdk_client(ttl_server.url) as client:
        ttl = {"strategy": "keep_latest", "ttl": 0.01}
        thread_id = (await client.threads.create(ttl=ttl))["thread_id"]
        await client.runs.wait(thread_id, "step", input={})
        await client.runs.wait(thread_id, "step", input={})
        deadline = time.monotonic() + 30
        while len(await client.threads.get_history(thread_id, limit=10)) > 1:
            assert time.monotonic() < deadline, "its older checkpoints were not pruned"
            await asyncio.sleep(0.1)
        assert (await client.threads.get_state(thread_id))["values"] == {"n": 2, "hold": False}
        assert (await client.threads.get(thread_id, include=["ttl"]))["ttl"]["strategy"] == (
            "keep_latest"
        )


async def test_a_bad_ttl_in_a_request_is_422(ttl_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=ttl_server.url, timeout=30) as http:
        for ttl in ({"ttl": -1}, {"strategy": "archive", "ttl": 5}, {"ttl": 5, "x": 1}, {}):
            answer = await http.post("/threads", json={"ttl": ttl})
            assert answer.status_code == 422, (ttl, answer.text)
            assert "ttl" in answer.json()["detail"], answer.text
        thread_id = (await http.post("/threads", json={})).json()["thread_id"]
        answer = await http.get(f"/threads/{thread_id}", params={"include": "values"})
        assert answer.status_code == 422, answer.text


async def test_two_sweepers_never_take_the_same_thread(runtime: Runtime) -> None:
    """Each batch is taken under ``FOR UPDATE SKIP LOCKED``: while one replica's transaction
    holds expired threads, another's finds none of them; a thread with an active run is in
    neither's hands."""
    ids = [str(uuid.uuid4()) for _ in range(5)]
    async with runtime.pool.connection() as conn:
        for thread_id in ids:
            await threads.create(conn, thread_id, {}, None, ("delete", 0.001))
        await runs.insert(
            conn,
            thread_id=ids[0],
            assistant_id="step",
            kwargs={},
            metadata={},
            multitask_strategy="reject",
        )
    await asyncio.sleep(0.1)  # past their 0.06 s TTL
    async with runtime.pool.connection() as one, runtime.pool.connection() as two:
        async with one.transaction():
            locked, taken = await thread_ttl.take_expired(one, 10)
            async with two.transaction():
                assert await thread_ttl.take_expired(two, 10) == (0, [])
            await thread_ttl.delete(one, [r["thread_id"] for r in taken])
        assert sorted(r["thread_id"] for r in taken) == sorted(ids[1:])
        async with two.transaction():
            assert await thread_ttl.take_expired(two, 10) == (0, [])
        cur = await one.execute("SELECT thread_id FROM threads WHERE thread_id = ANY(%s)", (ids,))
        assert [r["thread_id"] for r in await cur.fetchall()] == [ids[0]]
    assert locked == 4


BAD_TTL = {
    "strategy": ({"ttl": {"strategy": "archive"}}, '"checkpointer.ttl.strategy": Input should be'),
    "not-a-number": (
        {"ttl": {"default_ttl": "a month"}},
        '"checkpointer.ttl.default_ttl": Input should be a valid number',
    ),
    "zero-minutes": (
        {"ttl": {"default_ttl": 0}},
        '"checkpointer.ttl.default_ttl": Input should be greater than 0',
    ),
    "fractional-interval": (
        {"ttl": {"sweep_interval_minutes": 0.5}},
        '"checkpointer.ttl.sweep_interval_minutes": Input should be a valid integer',
    ),
    "not-an-object": ([], '"checkpointer" must be an object'),
}


@pytest.mark.parametrize("case", BAD_TTL)
def test_a_bad_ttl_config_is_one_clear_error(case: str, tmp_path: Path) -> None:
    checkpointer, expected = BAD_TTL[case]
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "checkpointer": checkpointer}))
    with pytest.raises(GraphConfigError) as caught:
        read_ttl(config)
    assert str(caught.value).startswith(f"{config}: "), caught.value
    assert expected in str(caught.value), caught.value


def test_what_is_not_served_of_the_checkpointer_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "langgraph.json"
    checkpointer = {
        "backend": "custom",
        "path": "./saver.py:saver",
        "serde": {"pickle_fallback": False},
        "ttl": {"default_ttl": 30, "sweep_limit": 50, "sweep_everything": True},
    }
    config.write_text(json.dumps({"graphs": {}, "checkpointer": checkpointer}))
    with caplog.at_level("WARNING"):
        ttl = read_ttl(config, sweep_seconds=2.5)
    assert (ttl.default_minutes, ttl.sweep_seconds, ttl.sweep_limit) == (30, 2.5, 50)
    text = "\n".join(caplog.messages)
    assert "backend './saver.py:saver' (checkpoints are kept in threadline's PostgreSQL)" in text
    assert "serde (threadline's serializer is used as it is)" in text, text
    assert '"checkpointer.ttl" has a key LangGraph does not define' in text, text
    threads.use_default_ttl(None)  # this process's new threads: no TTL, as before
