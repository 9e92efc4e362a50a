"""Run webhooks against real servers and a real receiver on 127.0.0.1 (allowed here with
``THREADLINE_WEBHOOK_ALLOW_PRIVATE``): each run end is POSTed once, in LangGraph Server's payload
shape, however the run was created; retried after 5xx, given up after the attempts limit;
refused at creation (422) for hosts that are not public; sent after a kill -9 that came between
the run's end and its delivery; sent once by two replicas."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import textwrap
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from tests.api.conftest import FAST
from tests.utils.processes import free_port
from tests.utils.runs import sdk_client, wait_status
from tests.utils.server import ServerProcess, serving
from tests.utils.webhook_receiver import Receiver, eventually, receiving

GRAPH = textwrap.dedent(
    '''
    """Shouts its text; fails when asked to, or waits first."""
    import asyncio
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph


    class State(TypedDict, total=False):
        text: str
        fail: bool
        wait: float


    async def shout(state: State) -> State:
        if state.get("wait"):
            await asyncio.sleep(state["wait"])
        if state.get("fail"):
            raise ValueError(f"cannot shout {state['text']!r}")
        return {"text": state["text"].upper()}


    builder = StateGraph(State)
    builder.add_node("shout", shout)
    builder.add_edge(START, "shout")
    builder.add_edge("shout", END)
    graph = builder.compile()
    '''
)
ALLOWING = {
    "THREADLINE_WEBHOOK_ALLOW_PRIVATE": "true",
    "THREADLINE_WEBHOOK_MAX_ATTEMPTS": "3",
    "THREADLINE_CRON_MIN_INTERVAL_SECONDS": "2",
    "THREADLINE_CRON_POLL_SECONDS": "0.2",
}
"""The receiver is on loopback: allowed. Three attempts: giving up comes within seconds."""
ADDED = ("run_started_at", "run_ended_at", "webhook_sent_at", "values", "error")
"""What LangGraph's payload adds to the run."""


def project(root: Path) -> Path:
    """A project serving the graph as ``hooks``; its ``langgraph.json``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "hooks.py").write_text(GRAPH)
    (root / "langgraph.json").write_text('{"graphs": {"hooks": "./hooks.py:graph"}}')
    return root / "langgraph.json"


@pytest.fixture(scope="module")
def hooks(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("hooks")
    config = project(root / "project")
    proc = ServerProcess(
        module_database_url, root / "data", config=config, env=ALLOWING, name="hooks", **FAST
    )
    with serving(proc):
        yield proc


async def outbox(database_url: str) -> list[dict[str, Any]]:
    """The webhooks not delivered (pending or failed), straight from the database."""
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cur = await conn.execute("SELECT * FROM webhooks ORDER BY id")
        return list(await cur.fetchall())


async def delivered(rx: Receiver, database_url: str, run_id: str) -> list[Any]:
    """Wait until the run's webhook reached ``rx`` and left the outbox; every POST about it."""

    async def done() -> bool:
        rows = [r for r in await outbox(database_url) if str(r["run_id"]) == run_id]
        return bool(rx.for_run(run_id)) and not rows

    await eventually(done, 60, f"the webhook of run {run_id} was not delivered")
    return rx.for_run(run_id)


def check_payload(body: dict[str, Any], run: dict[str, Any], url: str) -> None:
    """``body`` is the run as GET shows it, with LangGraph's additions."""
    assert {k: v for k, v in body.items() if k not in ADDED} == {
        k: v for k, v in run.items() if k != "error"
    }
    assert body["kwargs"]["webhook"] == url
    started, ended, sent = (
        datetime.fromisoformat(body[k])
        for k in ("run_started_at", "run_ended_at", "webhook_sent_at")
    )
    assert datetime.fromisoformat(run["created_at"]) <= started <= ended <= sent, body


async def test_a_run_posts_itself_once_when_it_ends_however_it_was_created(
    hooks: ServerProcess, module_database_url: str
) -> None:
    with receiving() as rx:
        url = rx.url()
        async with sdk_client(hooks.url) as client, httpx.AsyncClient(base_url=hooks.url) as http:
            # Background run on a thread: success.
            thread = (await client.threads.create())["thread_id"]
            run = await client.runs.create(thread, "hooks", input={"text": "hi"}, webhook=url)
            [body] = await delivered(rx, module_database_url, run["run_id"])
            ended = await wait_status(http, thread, run["run_id"], "success")
            check_payload(body, ended, url)
            assert body["status"] == "success" and "error" not in body
            assert body["values"] == {"text": "HI"}
            assert rx.posts[0].headers["content-type"] == "application/json"

            # A run that fails: its error as its stream's error event says it, its last state.
            thread = (await client.threads.create())["thread_id"]
            run = await client.runs.create(
                thread, "hooks", input={"text": "no", "fail": True}, webhook=url
            )
            [body] = await delivered(rx, module_database_url, run["run_id"])
            ended = await wait_status(http, thread, run["run_id"], "error")
            check_payload(body, ended, url)
            assert body["status"] == "error"
            assert body["error"] == {"error": "ValueError", "message": "cannot shout 'no'"}
            assert body["values"] == {"text": "no", "fail": True}

            # Streamed, and waited for without a thread.
            thread = (await client.threads.create())["thread_id"]
            parts = [
                p
                async for p in client.runs.stream(
                    thread, "hooks", input={"text": "stream"}, webhook=url
                )
            ]
            streamed = parts[0].data["run_id"]
            [body] = await delivered(rx, module_database_url, streamed)
            assert body["values"] == {"text": "STREAM"} and body["thread_id"] == thread
            values = await client.runs.wait(None, "hooks", input={"text": "wait"}, webhook=url)
            assert values == {"text": "WAIT"}
            [waited] = await eventually(
                lambda: rx.bodies(lambda b: b["values"] == {"text": "WAIT"})
            )
            assert len(await delivered(rx, module_database_url, waited["run_id"])) == 1
            assert waited["status"] == "success" and waited["kwargs"]["on_completion"] == "delete"


async def test_a_cancelled_run_posts_itself_interrupted(
    hooks: ServerProcess, module_database_url: str
) -> None:
    with receiving() as rx:
        async with sdk_client(hooks.url) as client, httpx.AsyncClient(base_url=hooks.url) as http:
            thread = (await client.threads.create())["thread_id"]
            run = await client.runs.create(
                thread, "hooks", input={"text": "slow", "wait": 60}, webhook=rx.url()
            )
            await wait_status(http, thread, run["run_id"], "running")
            await client.runs.cancel(thread, run["run_id"])
            [body] = await delivered(rx, module_database_url, run["run_id"])
    assert body["status"] == "interrupted"
    assert body["error"]["error"] == "UserInterrupt", body
    assert body["values"] == {"text": "slow", "wait": 60}


async def test_a_schedules_runs_post_themselves(
    hooks: ServerProcess, module_database_url: str
) -> None:
    with receiving() as rx:
        async with sdk_client(hooks.url) as client:
            thread = (await client.threads.create())["thread_id"]
            cron = await client.crons.create_for_thread(
                thread, "hooks", schedule="*/2 * * * * *", input={"text": "tick"}, webhook=rx.url()
            )
            assert cron["payload"]["webhook"] == rx.url()
            try:
                first = await eventually(
                    lambda: rx.bodies(lambda b: "cron_id" in b["metadata"]), 30
                )
            finally:
                await client.crons.delete(cron["cron_id"])
    body = first[0]
    assert body["metadata"]["cron_id"] == cron["cron_id"] and body["thread_id"] == thread
    assert body["status"] == "success" and body["values"] == {"text": "TICK"}


async def test_a_webhook_answered_500_is_retried_until_200(
    hooks: ServerProcess, module_database_url: str
) -> None:
    with receiving() as rx:
        rx.script["/flaky"] = [500, 503]
        async with sdk_client(hooks.url) as client:
            thread = (await client.threads.create())["thread_id"]
            run = await client.runs.create(
                thread, "hooks", input={"text": "again"}, webhook=rx.url("/flaky")
            )
            bodies = await delivered(rx, module_database_url, run["run_id"])
    assert len(bodies) == 3, bodies
    assert {b["status"] for b in bodies} == {"success"}
    assert len({b["run_started_at"] for b in bodies}) == 1  # the same end, sent again


async def test_a_webhook_is_given_up_after_the_attempts_limit_or_a_4xx(
    hooks: ServerProcess, module_database_url: str
) -> None:
    with receiving() as rx:
        rx.script["/down"] = [500] * 10
        rx.script["/gone"] = [404] * 10
        async with sdk_client(hooks.url) as client:
            runs = {}
            for path in ("/down", "/gone"):
                thread = (await client.threads.create())["thread_id"]
                run = await client.runs.create(
                    thread, "hooks", input={"text": path}, webhook=rx.url(path)
                )
                runs[path] = run["run_id"]

            async def both_failed() -> dict[str, Any]:
                failed = {
                    path: row
                    for row in await outbox(module_database_url)
                    for path, run_id in runs.items()
                    if str(row["run_id"]) == run_id and row["status"] == "failed"
                }
                return failed if len(failed) == 2 else {}

            given_up = await eventually(both_failed, 60)
        assert given_up["/down"]["attempts"] == 3 and given_up["/down"]["last_error"] == "HTTP 500"
        assert given_up["/gone"]["attempts"] == 1 and given_up["/gone"]["last_error"] == "HTTP 404"
        assert len(rx.for_run(runs["/down"])) == 3 and len(rx.for_run(runs["/gone"])) == 1


def loopback_name() -> str:
    """A host name (not ``localhost``) that resolves to loopback here: the machine's own."""
    name = socket.gethostname()
    try:
        found = {info[4][0] for info in socket.getaddrinfo(name, 80)}
    except OSError:
        found = set()
    if not found or not all(ipaddress.ip_address(a).is_loopback for a in found):
        pytest.skip(f"{name!r} does not resolve to loopback here")
    return name


REFUSED = [
    ("http://127.0.0.1:9/hook", "loopback"),
    ("http://[::1]:9/hook", "loopback"),
    ("http://10.1.2.3/hook", "private"),
    ("http://192.168.0.10:8080/hook", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://0x7f000001/hook", "loopback"),
    ("http://2130706433/hook", "loopback"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ("http://localhost:9/hook", "loopback"),
    ("http://LOCALHOST./hook", "loopback"),
    ("http://metadata.google.internal/", "metadata"),
    ("http://0.0.0.0:9/hook", "unspecified"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://[fd00::1]/hook", "private"),
    ("ftp://example.com/hook", "http"),
    ("/threads", "http"),
]


async def test_webhooks_to_hosts_that_are_not_public_are_refused_saying_why(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    server = make_server(database_url, tmp_path / "data", config=project(tmp_path / "p"))
    server.start()
    refused = [*REFUSED, (f"http://{loopback_name()}:9/hook", "loopback")]
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        for url, why in refused:
            body = {"assistant_id": "hooks", "input": {"text": "x"}, "webhook": url}
            cron = {**body, "schedule": "0 * * * *"}
            for path, sent in [
                (f"/threads/{tid}/runs", body),
                (f"/threads/{tid}/runs/wait", body),
                (f"/threads/{tid}/runs/stream", body),
                ("/runs", body),
                ("/runs/wait", body),
                ("/runs/crons", cron),
                (f"/threads/{tid}/runs/crons", cron),
            ]:
                answer = await http.post(path, json=sent)
                assert answer.status_code == 422, (url, path, answer.text)
                detail = answer.json()["detail"]
                assert "webhook" in detail and why in detail, (url, detail)
        assert (await http.get(f"/threads/{tid}/runs")).json() == []
        assert (await http.post("/runs/crons/count", json={})).json() == 0
        # A public address is accepted (its delivery is not this test's business).
        ok = await http.post(
            f"/threads/{tid}/runs",
            json={"assistant_id": "hooks", "input": {"text": "x"}, "webhook": "http://8.8.8.8/"},
        )
        assert ok.status_code == 200, ok.text
        # A schedule's webhook is checked when it is changed, too.
        cron = await http.post(
            "/runs/crons", json={"assistant_id": "hooks", "schedule": "0 * * * *"}
        )
        patched = await http.patch(
            f"/runs/crons/{cron.json()['cron_id']}", json={"webhook": "http://10.0.0.1/"}
        )
        assert patched.status_code == 422 and "private" in patched.json()["detail"], patched.text


@pytest.mark.slow
async def test_a_webhook_survives_a_kill_between_the_runs_end_and_its_delivery(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    """The receiver is down when the run ends: its first delivery fails, and the server is
    killed (-9) before another. Restarted, it delivers the webhook, once."""
    server = make_server(
        database_url, tmp_path / "data", config=project(tmp_path / "p"), env=ALLOWING
    )
    server.start()
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    async with sdk_client(server.url) as client:
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "hooks", input={"text": "later"}, webhook=url)

    async def tried() -> bool:
        return any(r["attempts"] >= 1 and r["last_error"] for r in await outbox(database_url))

    await eventually(tried, 30, "the first delivery was not tried")
    server.kill()
    [row] = await outbox(database_url)
    assert row["status"] == "pending" and str(row["run_id"]) == run["run_id"]
    with receiving(port) as rx:
        server.start()
        bodies = await delivered(rx, database_url, run["run_id"])
    assert len(bodies) == 1 and bodies[0]["values"] == {"text": "LATER"}


@pytest.mark.slow
async def test_two_replicas_deliver_each_webhook_once(
    make_server: Callable[..., ServerProcess], database_url: str, tmp_path: Path
) -> None:
    config = project(tmp_path / "p")
    data = tmp_path / "data"
    a = make_server(database_url, data, config=config, env=ALLOWING, name="a").start()
    b = make_server(database_url, data, config=config, env=ALLOWING, name="b").start()
    with receiving(delay=0.3) as rx:  # slow answers: both replicas' loops overlap
        runs = []
        for i in range(8):
            async with sdk_client((a, b)[i % 2].url) as client:
                thread = (await client.threads.create())["thread_id"]
                run = await client.runs.create(
                    thread, "hooks", input={"text": f"r{i}"}, webhook=rx.url()
                )
                runs.append(run["run_id"])
        counts = await asyncio.gather(*(delivered(rx, database_url, r) for r in runs))
    assert [len(c) for c in counts] == [1] * 8
    assert await outbox(database_url) == []
