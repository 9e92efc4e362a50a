"""Slow clients (issue 37): a stream whose client stops reading is dropped after
``THREADLINE_SSE_SEND_TIMEOUT_SECONDS`` and resumed with ``Last-Event-ID``, the run unaffected; a
client holds at most ``THREADLINE_MAX_STREAMS_PER_CLIENT`` streams (its identity with
authentication, else its address), and every way a stream ends gives its slot back.

The client that never reads is a raw socket with a small receive buffer, on the stream of a graph
that writes more than the kernel's buffers and then uvicorn's can hold, after which the server's
sends wait for a client that will never take them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import FAST
from tests.utils.runs import new_thread, wait_status
from tests.utils.server import ServerProcess, serving
from tests.utils.tasks import counter

SEND_TIMEOUT = 1.0
CAP = 3
SERVER_ENV = {
    "THREADLINE_SSE_SEND_TIMEOUT_SECONDS": str(SEND_TIMEOUT),
    "THREADLINE_MAX_STREAMS_PER_CLIENT": str(CAP),
}
BIG_PY = """
from typing import TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    events: int


def emit(state: State) -> State:
    write = get_stream_writer()
    for i in range(state["events"]):
        write({"i": i, "pad": "x" * 65536})
    return {}


builder = StateGraph(State)
builder.add_node("emit", emit)
builder.add_edge(START, "emit")
builder.add_edge("emit", END)
"""
"""A graph whose stream is as many 64 KiB ``custom`` events as its input asks for."""


@pytest.fixture(scope="module")
def server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("slow")
    (root / "big.py").write_text(BIG_PY)
    config = root / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"big": "./big.py:builder"}}))
    proc = ServerProcess(
        module_database_url, root / "data", config=config, env=SERVER_ENV, name="slow", **FAST
    )
    with serving(proc):
        yield proc


def big_input() -> dict[str, Any]:
    """Enough events to fill the kernel's send buffer (as large as it may grow on loopback)
    twice over, with uvicorn's own and the client's small receive buffer besides."""
    return {"events": math.ceil((2 * kernel_send_buffer_max() + (2 << 20)) / 65536)}


Frame = tuple[str, str, str]
"""(id, event, data) of one SSE frame."""


def frames(body: bytes) -> list[Frame]:
    """The complete frames of an SSE body that have an id (a cut-off last one is left out)."""
    out: list[Frame] = []
    for block in body.decode(errors="replace").replace("\r\n", "\n").split("\n\n")[:-1]:
        fields = {}
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            fields[name] = value
        if "id" in fields:
            out.append((fields["id"], fields.get("event", ""), fields.get("data", "")))
    return out


def response(raw: bytes) -> tuple[int, bytes, bool]:
    """(status, body, complete) of a chunked HTTP/1.1 response, which may be cut off anywhere."""
    head_end = raw.index(b"\r\n\r\n")
    status = int(raw[:head_end].split(b" ", 2)[1])
    pos, body = head_end + 4, bytearray()
    while (line_end := raw.find(b"\r\n", pos)) >= 0:
        size = int(raw[pos:line_end], 16)
        if size == 0:
            return status, bytes(body), True
        body += raw[line_end + 2 : line_end + 2 + size]
        pos = line_end + 2 + size + 2
    return status, bytes(body), False


def kernel_send_buffer_max() -> int:
    """The most the kernel may buffer for one socket's sends (it grows to that on loopback)."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return 8 << 20


ESTABLISHED = "01"
PROC_NET_TCP = Path("/proc/net/tcp")


def server_end(server: ServerProcess, client: socket.socket) -> str | None:
    """The TCP state of the server's end of a loopback connection (``/proc/net/tcp``), None
    once the kernel let it go (or where there is no ``/proc/net/tcp``)."""
    client_port = client.getsockname()[1]
    try:
        table = PROC_NET_TCP.read_text()
    except OSError:
        return None
    for line in table.splitlines()[1:]:
        local, remote, state = line.split()[1:4]
        if int(local.rsplit(":", 1)[1], 16) == server.port and (
            int(remote.rsplit(":", 1)[1], 16) == client_port
        ):
            return state
    return None


async def sse_clients(http: httpx.AsyncClient) -> float:
    response = await http.get("/metrics")
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("threadline_sse_clients "):
            return float(line.split()[1])
    raise AssertionError("no threadline_sse_clients in /metrics")


async def until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def finished_run(http: httpx.AsyncClient) -> tuple[str, str]:
    """A finished run of the big graph: (thread id, run id)."""
    tid = await new_thread(http)
    body = {"assistant_id": "big", "input": big_input(), "stream_mode": ["custom"]}
    response = await http.post(f"/threads/{tid}/runs/wait", json=body)
    assert response.status_code == 200, response.text
    return tid, (await http.get(f"/threads/{tid}/runs")).json()[0]["run_id"]


async def replay(http: httpx.AsyncClient, tid: str, rid: str, after: str = "-1") -> list[Frame]:
    url = f"/threads/{tid}/runs/{rid}/stream"
    response = await http.get(url, headers={"Last-Event-ID": after})
    assert response.status_code == 200, response.text
    return frames(response.content)


async def connect_without_reading(server: ServerProcess, request: bytes) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # Before connecting: the window the client offers stays small.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, (server.host, server.port))
        await loop.sock_sendall(sock, request)
    except BaseException:
        sock.close()
        raise
    return sock


async def read_to_end(sock: socket.socket, timeout: float) -> bytes:
    """Everything the socket receives until the server closes it (EOF or a reset)."""
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    try:
        async with asyncio.timeout(timeout):
            while data := await loop.sock_recv(sock, 1 << 16):
                chunks.append(data)
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open (read {sum(map(len, chunks))} bytes)")
    return b"".join(chunks)


async def stall_until_dropped(
    http: httpx.AsyncClient, server: ServerProcess, method: str, path: str, body: Any = None
) -> bytes:
    """Request a stream on a new connection and read nothing until the server dropped it (it
    stopped counting the stream in ``threadline_sse_clients``); then everything the connection
    still delivers, until it ends."""
    await until(lambda: _zero(http), 10, "streams of earlier requests are still open")
    content = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(content)}\r\n"
    sock = await connect_without_reading(server, f"{head}\r\n".encode() + content)
    with contextlib.closing(sock):
        started = time.monotonic()
        held = False
        while True:
            if await sse_clients(http):
                held = True
            elif held:
                break
            assert time.monotonic() - started < SEND_TIMEOUT + 15, (
                "the stalled stream was never dropped" if held else "the stream never started"
            )
            await asyncio.sleep(0.05)
        assert time.monotonic() - started >= SEND_TIMEOUT
        # The server closed its end, dropping what it had buffered (the kernel still sends what
        # it holds as the client reads, then the end). A server that only stopped the stream
        # would keep its end open until a client that never reads has read everything.
        assert server_end(server, sock) != ESTABLISHED
        return await read_to_end(sock, timeout=10)


async def _zero(http: httpx.AsyncClient) -> bool:
    return await sse_clients(http) == 0


async def test_a_client_that_stops_reading_is_dropped_and_resumes(
    http: httpx.AsyncClient, server: ServerProcess
) -> None:
    tid = await new_thread(http)
    body = {"assistant_id": "big", "input": big_input(), "stream_mode": ["custom"]}
    raw = await stall_until_dropped(http, server, "POST", f"/threads/{tid}/runs/stream", body)

    # The run did not depend on its client.
    rid = (await http.get(f"/threads/{tid}/runs")).json()[0]["run_id"]
    await wait_status(http, tid, rid, "success")
    full = await replay(http, tid, rid)
    assert full[-1][1] == "end" and len(full) == big_input()["events"] + 2  # metadata, end

    # The client got part of the stream, then the connection ended.
    status, cut, complete = response(raw)
    assert status == 200 and not complete
    partial = frames(cut)
    assert 0 < len(partial) < len(full) and partial == full[: len(partial)]

    # A new connection resumes with Last-Event-ID where the cut-off stream stopped.
    rest = await replay(http, tid, rid, after=partial[-1][0])
    assert partial + rest == full
    assert json.loads(rest[-1][2]) == {"run_id": rid, "status": "success"}

    # One line says what happened: no traceback, no unfinished response.
    log = server.log_tail(400)
    assert "dropped an SSE client that accepted nothing for 1.0 s" in log
    assert "Traceback" not in log and "without completing response" not in log, log


async def stream_status(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> int:
    async with http.stream(method, url, **kwargs) as response:
        return response.status_code


async def test_streams_per_client_are_capped_and_every_end_frees_its_slot(
    http: httpx.AsyncClient, server: ServerProcess
) -> None:
    done_tid, done_rid = await finished_run(http)
    done = f"/threads/{done_tid}/runs/{done_rid}/stream"
    tid = await new_thread(http)
    started = await http.post(
        f"/threads/{tid}/runs", json={"assistant_id": "agent", "input": counter(1, 60)}
    )
    rid = started.json()["run_id"]
    live = f"/threads/{tid}/runs/{rid}/stream"
    create = {"assistant_id": "agent", "input": counter(1)}
    try:
        async with contextlib.AsyncExitStack() as stack:
            held = [await stack.enter_async_context(http.stream("GET", live)) for _ in range(CAP)]
            assert [r.status_code for r in held] == [200] * CAP

            refused = await http.get(live)
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) > 0
            detail = refused.json()["detail"]
            assert "THREADLINE_MAX_STREAMS_PER_CLIENT" in detail and "127.0.0.1" in detail
            # Every stream route, and a run is refused before it is created.
            other = await new_thread(http)
            for method, url, body in [
                ("POST", f"/threads/{other}/runs/stream", create),
                ("POST", "/runs/stream", create),
                ("GET", f"/runs/{rid}/stream", None),
                ("GET", f"/threads/{tid}/stream", None),
            ]:
                assert await stream_status(http, method, url, json=body) == 429, url
            assert (await http.get(f"/threads/{other}/runs")).json() == []

            await held[0].aclose()  # closing one frees a slot
            await until(lambda: _opens(http, live), 5, "a closed stream's slot was not given back")

        await until(lambda: _zero(http), 5, "closed streams are still counted")
        # Every way a stream ends gives its slot back; each kind, more times than the cap.
        for _ in range(CAP + 1):
            # The end of the run's stream.
            assert (await replay(http, done_tid, done_rid))[-1][1] == "end"
            # Refused after the slot was claimed: a bad Last-Event-ID, unknown runs and threads.
            bad = await http.get(live, headers={"Last-Event-ID": "x"})
            assert bad.status_code == 422, bad.text
            unknown = uuid.uuid4()
            assert (await http.get(f"/threads/{tid}/runs/{unknown}/stream")).status_code == 404
            assert (await http.get(f"/runs/{unknown}/stream")).status_code == 404
            gone = await http.post(f"/threads/{unknown}/runs/stream", json=create)
            assert gone.status_code == 404, gone.text
            # The client goes away mid-stream.
            async with http.stream("GET", live) as response:
                assert response.status_code == 200
                async for _ in response.aiter_bytes():
                    break
        # The client stops reading and is dropped.
        await stall_until_dropped(http, server, "GET", done)

        await until(lambda: _zero(http), 10, "streams are still counted")
        async with contextlib.AsyncExitStack() as stack:
            held = [await stack.enter_async_context(http.stream("GET", live)) for _ in range(CAP)]
            assert [r.status_code for r in held] == [200] * CAP, "a slot leaked"
            assert (await http.get(live)).status_code == 429
    finally:
        await http.post(f"/threads/{tid}/runs/{rid}/cancel")
    await wait_status(http, tid, rid, {"interrupted", "error", "success"})


async def _opens(http: httpx.AsyncClient, url: str) -> bool:
    return await stream_status(http, "GET", url) == 200


AUTH_PY = """
from langgraph_sdk import Auth

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    if not authorization or not authorization.startswith("Bearer "):
        raise Auth.exceptions.HTTPException(status_code=401, detail="send a bearer token")
    return authorization.removeprefix("Bearer ")  # the token is the identity
"""


async def test_with_authentication_the_cap_is_per_identity(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "auth.py").write_text(AUTH_PY)
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"auth": {"path": "./auth.py:auth"}}))
    env = {"THREADLINE_MAX_STREAMS_PER_CLIENT": "1"}
    proc = make_server(database_url, tmp_path / "data", config=config, env=env, name="auth")
    proc.start()
    async with contextlib.AsyncExitStack() as stack:
        streams: dict[str, str] = {}
        clients: dict[str, httpx.AsyncClient] = {}
        for who in ("alice", "bob"):
            http = await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=proc.url, headers={"Authorization": f"Bearer {who}"}, timeout=30
                )
            )
            tid = await new_thread(http)
            run = await http.post(
                f"/threads/{tid}/runs", json={"assistant_id": "agent", "input": counter(1, 60)}
            )
            assert run.status_code == 200, run.text
            streams[who] = f"/threads/{tid}/runs/{run.json()['run_id']}/stream"
            clients[who] = http
            stack.push_async_callback(http.post, streams[who].replace("/stream", "/cancel"))

        alice, bob = clients["alice"], clients["bob"]
        held = await stack.enter_async_context(alice.stream("GET", streams["alice"]))
        assert held.status_code == 200
        refused = await alice.get(streams["alice"])
        assert refused.status_code == 429
        assert "identity 'alice'" in refused.json()["detail"]
        # The same address, another identity: bob has a slot of his own.
        assert await stream_status(bob, "GET", streams["bob"]) == 200
