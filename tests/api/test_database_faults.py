"""Faults of PostgreSQL itself, with runs in flight on two replicas: no run ends in a false
``success``, none fails for the database's absence, and requests are answered honestly meanwhile.

Each test starts a PostgreSQL of its own (``tests.utils.pg_cluster``) and two ``threadline
serve`` replicas on it, sharing one data directory; ``counter`` runs, each followed by an SSE
client that reconnects with ``Last-Event-ID`` (and waits out a ``503``), are cut by a restart, a
``kill -9`` of the postmaster, an outage of several seconds, or a failover to a standby. Then:

- every run ends ``success`` with its task ``verified`` and each line of ``counter.txt`` once
  (nothing done twice, nothing reported done that was not);
- ``THREADLINE_MAX_ATTEMPTS=1``: a single attempt judged as stalled would end a run in
  ``error``, so an attempt the database's absence stopped is not counted against its run;
- every follower saw every event once, numbered without a gap, through the ``end`` event;
- while the database is down, requests get ``503`` with ``Retry-After`` within seconds, and the
  outage is logged once, not once per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import one_graph_project
from tests.utils.pg_cluster import PgCluster, PgServer, multi_host_url, pg_cluster_fixture
from tests.utils.runs import MODES, start_run, wait_status
from tests.utils.server import ServerProcess
from tests.utils.sse import StreamFollower
from tests.utils.tasks import counter
from tests.utils.workspace import counter_lines

pytestmark = pytest.mark.slow

__all__ = ["pg_cluster_fixture"]  # the fixture, imported for this module's tests

RUNS = 6
LINES = 6
DELAY = 0.3
STRICT = {"THREADLINE_MAX_ATTEMPTS": "1"}
"""One stalled attempt ends a run in error: any attempt counted against a run shows."""


@contextlib.contextmanager
def replicas(
    make_server: Callable[..., ServerProcess], url: str, data_dir: Path
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    a = make_server(url, data_dir, name="a", env=STRICT)
    b = make_server(url, data_dir, name="b", env=STRICT)
    a.start()
    b.start()
    yield a, b


async def start_runs(
    servers: tuple[ServerProcess, ServerProcess],
) -> list[tuple[str, str, StreamFollower, asyncio.Task[Any]]]:
    """``RUNS`` counter runs, alternately on each replica, each with a follower that reads its
    stream from either replica until ``end``."""
    started = []
    for i in range(RUNS):
        server = servers[i % 2]
        tid, rid = await start_run(
            server, {"assistant_id": "agent", "input": counter(LINES, DELAY), "stream_mode": MODES}
        )
        follower = StreamFollower(tid, rid)
        task = asyncio.create_task(follower.follow([server, servers[1 - i % 2]], timeout=150))
        started.append((tid, rid, follower, task))
    return started


async def verify(
    servers: tuple[ServerProcess, ServerProcess],
    data_dir: Path,
    started: list[tuple[str, str, StreamFollower, asyncio.Task[Any]]],
) -> None:
    """Every run ended ``success`` with its work whole, and every follower saw it all once."""
    await asyncio.gather(*(task for *_, task in started))
    async with httpx.AsyncClient(base_url=servers[0].url, timeout=30) as http:
        for tid, rid, follower, _ in started:
            run = (await http.get(f"/threads/{tid}/runs/{rid}")).json()
            state = (await http.get(f"/threads/{tid}/state")).json()
            where = f"run {rid} (attempt {run.get('attempt')}): {run.get('error')}"
            assert run["status"] == "success", where
            assert state["values"]["status"] == "verified", where
            assert state["next"] == [], where
            assert counter_lines(data_dir, tid) == [str(i) for i in range(1, LINES + 1)], where
            events = follower.events
            assert [int(e.id) for e in events] == list(range(1, len(events) + 1)), where
            assert events[-1].event == "end" and events[-1].data["status"] == "success", where


async def answered_503(url: str, within: float) -> httpx.Response:
    """The first answer of ``GET /ok`` that is a ``503``, asked until ``within`` seconds
    passed; each request must itself answer within a few seconds."""
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(base_url=url, timeout=8) as http:
        while True:
            asked = time.monotonic()
            response = await http.get("/ok")
            assert time.monotonic() - asked < 6, "a request hung while the database was down"
            if response.status_code == 503 or time.monotonic() > deadline:
                return response
            await asyncio.sleep(0.2)


def outage_lines(server: ServerProcess) -> tuple[int, int]:
    log = server.log_path.read_text(errors="replace")
    return len(re.findall("database unreachable", log)), len(re.findall("reachable again", log))


async def cut(
    pg: PgServer,
    make_server: Callable[..., ServerProcess],
    tmp_path: Path,
    fault: Callable[[], None],
) -> tuple[ServerProcess, ServerProcess]:
    data_dir = tmp_path / "data"
    with replicas(make_server, pg.url, data_dir) as servers:
        started = await start_runs(servers)
        await asyncio.sleep(2 * DELAY * 2)  # a few lines in
        await asyncio.to_thread(fault)
        await verify(servers, data_dir, started)
        return servers


async def test_a_postmaster_killed_mid_run_ends_no_run_in_a_false_success(
    pg_cluster: PgCluster, make_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    pg = await asyncio.to_thread(pg_cluster.server)

    def kill_then_start() -> None:
        pg.kill9()
        time.sleep(3)
        pg.start()

    await cut(pg, make_server, tmp_path, kill_then_start)


async def test_a_fast_restart_fails_no_run_and_counts_no_attempt(
    pg_cluster: PgCluster, make_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    pg = await asyncio.to_thread(pg_cluster.server)
    await cut(pg, make_server, tmp_path, pg.restart)


async def test_an_outage_answers_503_at_once_and_runs_continue_when_it_ends(
    pg_cluster: PgCluster, make_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    pg = await asyncio.to_thread(pg_cluster.server)
    data_dir = tmp_path / "data"
    with replicas(make_server, pg.url, data_dir) as servers:
        started = await start_runs(servers)
        # A stream through the replica that does not execute the run (it reads the table):
        # it stays open through the outage and goes on, on the same connection.
        tid, rid, *_ = started[0]
        steady = StreamFollower(tid, rid)
        steady_task = asyncio.create_task(steady.follow([servers[1]], timeout=150))
        # A join waiting when the outage begins waits through it and answers the run's values.
        joiner = httpx.AsyncClient(base_url=servers[0].url, timeout=120)
        join = asyncio.create_task(
            joiner.get(f"/threads/{started[1][0]}/runs/{started[1][1]}/join")
        )
        async with httpx.AsyncClient(base_url=servers[1].url, timeout=8) as http:
            thread = (await http.post("/threads", json={})).json()["thread_id"]
            await asyncio.sleep(1.0)
            await asyncio.to_thread(pg.stop, "fast")
            down = time.monotonic()
            for server in servers:
                response = await answered_503(server.url, within=8)
                assert response.status_code == 503, response.text
                assert response.headers["Retry-After"].isdigit()
                assert "database" in response.json()["detail"]
            # Any request, not only /ok: answered at once now the outage is known.
            for method, path in [("GET", f"/threads/{thread}"), ("POST", "/threads")]:
                asked = time.monotonic()
                response = await http.request(method, path, json={} if method == "POST" else None)
                assert response.status_code == 503, (path, response.text)
                assert "Retry-After" in response.headers
                assert time.monotonic() - asked < 1.0, "known outage: no wait"
            await asyncio.sleep(max(0.0, 8 - (time.monotonic() - down)))  # an 8 s outage
            await asyncio.to_thread(pg.start)
            ok = await http.get("/ok")
            for _ in range(50):
                if ok.status_code == 200:
                    break
                await asyncio.sleep(0.2)
                ok = await http.get("/ok")
            assert ok.status_code == 200, ok.text
        await verify(servers, data_dir, started)
        assert [e.id for e in await steady_task] == [e.id for e in started[0][2].events]
        assert steady.connections == 1, "the stream was dropped during the outage"
        joined = await join
        await joiner.aclose()
        assert joined.status_code == 200, joined.text
        assert joined.json()["status"] == "verified"
        for server in servers:
            unreachable, back = outage_lines(server)
            assert unreachable == 1 and back == 1, (server.name, unreachable, back)
            assert "Traceback" not in server.log_path.read_text(errors="replace")


async def test_a_failover_to_a_promoted_standby_finishes_every_run_once(
    pg_cluster: PgCluster, make_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    primary, standby = await asyncio.to_thread(pg_cluster.primary_with_standby, synchronous=True)
    url = multi_host_url(primary, standby)
    data_dir = tmp_path / "data"
    with replicas(make_server, url, data_dir) as servers:
        started = await start_runs(servers)
        await asyncio.sleep(2 * DELAY * 2)

        def fail_over() -> None:
            primary.stop("immediate")
            standby.promote()

        await asyncio.to_thread(fail_over)
        await verify(servers, data_dir, started)


async def test_a_hung_database_answers_503_within_seconds(
    pg_cluster: PgCluster, make_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """A server that stops answering without closing anything (a hung host, a network that
    drops packets): ``/ok`` says so within seconds instead of waiting for it."""
    pg = await asyncio.to_thread(pg_cluster.server)
    server = make_server(pg.url, tmp_path / "data", name="hung")
    await asyncio.to_thread(server.start)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        assert (await http.get("/ok")).status_code == 200
        await asyncio.to_thread(pg.freeze)
        try:
            asked = time.monotonic()
            response = await http.get("/ok")
            assert time.monotonic() - asked < 7
            assert response.status_code == 503, response.text
            assert (
                "did not answer" in response.json()["detail"]
                or "unreachable" in (response.json()["detail"])
            )
            assert response.headers["Retry-After"].isdigit()
        finally:
            await asyncio.to_thread(pg.thaw)
        for _ in range(50):
            if (await http.get("/ok")).status_code == 200:
                break
            await asyncio.sleep(0.2)
        assert (await http.get("/ok")).status_code == 200


FOREIGN_DATABASE_GRAPH = '''
"""A node whose own database (not the service's) is gone: psycopg's errors, every time."""
from typing import TypedDict

import psycopg
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    done: bool


def query(state: State) -> State:
    raise psycopg.OperationalError("connection to the reports database failed")


builder = StateGraph(State)
builder.add_node("query", query)
builder.add_edge(START, "query")
builder.add_edge("query", END)
graph = builder.compile()
'''


async def test_a_graphs_own_database_error_while_ours_answers_ends_the_run(
    database_url: str, tmp_path: Path
) -> None:
    """The same errors from a node's own database, while the service's answers all along, are
    not handed back forever: each attempt is judged, and the run ends in error after the
    attempts limit."""
    with one_graph_project(
        database_url, tmp_path, "reports", "reports.py", FOREIGN_DATABASE_GRAPH
    ) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            thread = (await http.post("/threads", json={})).json()["thread_id"]
            run = (
                await http.post(
                    f"/threads/{thread}/runs", json={"assistant_id": "reports", "input": {}}
                )
            ).json()
            ended = await wait_status(http, thread, run["run_id"], {"error"}, timeout=60)
        assert "saved no new checkpoint" in ended["error"], ended
        # The first attempt saves the input checkpoint (progress); then THREADLINE_MAX_ATTEMPTS
        # (3) attempts in a row that save nothing, and the next one ends the run.
        assert 1 < ended["attempt"] <= 6, ended
