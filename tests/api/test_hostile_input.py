"""Hostile input, by hand: every kind of value that could not be stored, or could break a later
read, in every field and route that takes it, gets a 4xx whose ``detail`` says what to do, never
a 5xx; afterwards the server answers and every thread it stored can be read.

Also: the OpenAPI document declares what the routes answer, and a workspace file that a tool
appends to while it is read is sent whole and consistent.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.http.json_body import MAX_JSON_DEPTH
from api.platform.validation import MAX_OFFSET, METADATA_MAX_BYTES, METADATA_MAX_DEPTH
from tests.utils.server import ServerProcess

JSON = {"content-type": "application/json"}

# JSON texts (not Python values: NaN, lone surrogates and huge integers must reach the server
# exactly as a hostile client writes them).
BAD_VALUES = {
    "nul": '"a\\u0000b"',
    "surrogate": '"a\\ud800b"',
    "low surrogate": '"\\udc00"',
    "nan": "NaN",
    "infinity": "Infinity",
    "-infinity": "-Infinity",
    "overflow": "1e999",
    "big int": "123456789012345678901234567890",
    "int64+1": str(2**63),
    "deep": "[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5),
}
BAD_KEYS = {"nul key": '"k\\u0000"', "surrogate key": '"\\ud83d"'}

# Where a value goes: a route, and a body template with {} where the value is put.
FIELDS = [
    ("POST", "/threads", '{"metadata": {"k": %s}}'),
    ("POST", "/threads", '{"metadata": {"k": [1, {"x": %s}]}}'),
    ("POST", "/threads", '{"thread_id": %s}'),
    ("PATCH", "/threads/{tid}", '{"metadata": {"k": %s}}'),
    ("POST", "/threads/search", '{"metadata": {"k": %s}}'),
    ("POST", "/threads/search", '{"offset": %s}'),
    ("POST", "/threads/search", '{"limit": %s}'),
    ("POST", "/threads/search", '{"status": %s}'),
    ("POST", "/threads/prune", '{"thread_ids": [%s]}'),
    ("POST", "/threads/{tid}/history", '{"before": %s}'),
    ("POST", "/threads/{tid}/history", '{"before": {"checkpoint_id": %s}}'),
    ("POST", "/threads/{tid}/history", '{"limit": %s}'),
    ("POST", "/threads/{tid}/runs", '{"assistant_id": "agent", "metadata": {"k": %s}}'),
    (
        "POST",
        "/threads/{tid}/runs",
        '{"assistant_id": "agent", "config": {"configurable": {"k": %s}}}',
    ),
    ("POST", "/threads/{tid}/runs", '{"assistant_id": "agent", "config": {"recursion_limit": %s}}'),
    (
        "POST",
        "/threads/{tid}/runs",
        '{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": %s}]}}',
    ),
    ("POST", "/threads/{tid}/runs", '{"assistant_id": "agent", "input": {"task": {"name": %s}}}'),
    (
        "POST",
        "/threads/{tid}/runs/wait",
        '{"assistant_id": "agent", "input": {"task": {"name": "counter", "params": {"n": %s}}}}',
    ),
    ("POST", "/threads/{tid}/runs/stream", '{"assistant_id": "agent", "command": {"resume": %s}}'),
    ("POST", "/threads/{tid}/runs", '{"assistant_id": %s}'),
    ("POST", "/threads/{tid}/runs", '{"assistant_id": "agent", "stream_mode": [%s]}'),
    (
        "POST",
        "/threads/{tid}/approvals",
        '{"interrupt_id": "x", "decisions": [{"type": "reject", "message": %s}]}',
    ),
    (
        "POST",
        "/threads/{tid}/approvals",
        '{"interrupt_id": "x", "decisions": [{"type": "edit", '
        '"edited_action": {"name": "write_file", "args": {"path": %s}}}]}',
    ),
    (
        "POST",
        "/threads/{tid}/approvals",
        '{"interrupt_id": %s, "decisions": [{"type": "approve"}]}',
    ),
    ("POST", "/threads/{tid}/approvals", '{"interrupt_id": "x", "decisions": [%s]}'),
]
KEY_FIELDS = [
    ("POST", "/threads", '{"metadata": {%s: 1}}'),
    ("PATCH", "/threads/{tid}", '{"metadata": {%s: 1}}'),
    ("POST", "/threads/search", '{"metadata": {%s: 1}}'),
    ("POST", "/threads/{tid}/runs", '{"assistant_id": "agent", "config": {%s: 1}}'),
    (
        "POST",
        "/threads/{tid}/approvals",
        '{"interrupt_id": "x", "decisions": [{"type": "edit", '
        '"edited_action": {"name": "write_file", "args": {%s: 1}}}]}',
    ),
]


class Probes:
    """Sends requests and checks that each answer is a 4xx (or what was expected) with JSON
    ``{"detail": str}`` that says something, never a 5xx."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.sent = 0

    def send(
        self,
        method: str,
        path: str,
        body: str | bytes | None = None,
        headers: dict[str, str] | None = None,
        expect: int | tuple[int, ...] | None = None,
        params: Any = None,
    ) -> httpx.Response:
        content = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        sent_headers = {**(JSON if content is not None else {}), **(headers or {})}
        response = self.client.request(
            method, path, content=content, headers=sent_headers, params=params
        )
        self.sent += 1
        what = (method, path[:120], (content or b"")[:120], response.status_code, response.text)
        assert response.status_code < 500, what
        if expect is not None:
            wanted = expect if isinstance(expect, tuple) else (expect,)
            assert response.status_code in wanted, what
        if response.status_code >= 400:
            assert response.headers["content-type"].startswith("application/json"), what
            detail = response.json()["detail"]
            assert isinstance(detail, str) and len(detail) > 15, what
        return response

    def refused(self, method: str, path: str, body: str | bytes | None = None, **kw: Any) -> str:
        response = self.send(method, path, body, **kw)
        assert 400 <= response.status_code < 500, (method, path, body, response.text)
        return str(response.json()["detail"])


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Any:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


@pytest.fixture
def probes(client: httpx.Client) -> Probes:
    return Probes(client)


def new_thread(client: httpx.Client, **body: Any) -> str:
    response = client.post("/threads", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["thread_id"])


def all_threads_readable(client: httpx.Client) -> int:
    """Every stored thread answers GET, state and its runs (200); returns how many there are."""
    offset, seen = 0, 0
    while True:
        page = client.post("/threads/search", json={"limit": 1000, "offset": offset})
        assert page.status_code == 200, page.text
        threads = page.json()
        for thread in threads:
            tid = thread["thread_id"]
            for path in (f"/threads/{tid}", f"/threads/{tid}/state", f"/threads/{tid}/runs"):
                answer = client.get(path)
                assert answer.status_code == 200, (path, answer.text)
        seen += len(threads)
        if len(threads) < 1000:
            return seen
        offset += 1000


def test_bad_values_in_every_field_are_422(client: httpx.Client, probes: Probes) -> None:
    tid = new_thread(client, metadata={"keep": "me"})
    for method, route, template in FIELDS:
        for name, value in BAD_VALUES.items():
            detail = probes.refused(method, route.format(tid=tid), template % value, expect=422)
            if name in ("nul", "surrogate", "nan", "deep", "big int"):
                assert "send" in detail or "remove" in detail, (name, detail)
    for method, route, template in KEY_FIELDS:
        for value in BAD_KEYS.values():
            probes.refused(method, route.format(tid=tid), template % value, expect=422)
    # Nothing was stored by any of them.
    thread = client.get(f"/threads/{tid}").json()
    assert thread["metadata"] == {"keep": "me"}
    assert client.get(f"/threads/{tid}/runs").json() == []
    assert all_threads_readable(client) >= 1
    print(f"{probes.sent} probes")


def test_the_messages_say_what_is_wrong(client: httpx.Client, probes: Probes) -> None:
    tid = new_thread(client)
    runs = f"/threads/{tid}/runs"
    nul = probes.refused(
        "POST",
        runs,
        '{"assistant_id": "agent", "input": {"messages": '
        '[{"role": "user", "content": "a\\u0000"}]}}',
    )
    assert "input.messages.0.content" in nul and "NUL" in nul, nul
    assert "unpaired surrogate" in probes.refused(
        "POST", "/threads", '{"metadata": {"k": "\\ud800"}}'
    )
    assert "NaN" in probes.refused("POST", "/threads", '{"metadata": {"k": NaN}}')
    offset = '{"offset": ' + str(2**63) + "}"
    assert "64-bit" in probes.refused("POST", "/threads/search", offset)
    assert "levels deep" in probes.refused("POST", "/threads", BAD_VALUES["deep"])
    assert "UTF-8" in probes.refused("POST", "/threads", b'{"metadata": {"k": "\xff"}}')
    assert "not valid JSON" in probes.refused("POST", "/threads", '{"metadata": ')
    assert "is not supported" in probes.refused(
        "POST",
        f"/threads/{tid}/approvals",
        '{"interrupt_id": "x", "decisions": [{"type": "approve"}], "stream_mode": ["debug"]}',
    )
    assert "reject" in probes.refused(
        "POST", runs, '{"assistant_id": "agent", "multitask_strategy": "sideways"}'
    )


def test_metadata_limits(client: httpx.Client, probes: Probes) -> None:
    def nested(levels: int) -> dict[str, Any]:
        value: dict[str, Any] = {}
        for _ in range(levels - 1):
            value = {"a": value}
        return value

    ok = new_thread(client, metadata=nested(METADATA_MAX_DEPTH))
    assert client.get(f"/threads/{ok}").status_code == 200
    for method, path, body in (
        ("POST", "/threads", {"metadata": nested(METADATA_MAX_DEPTH + 1)}),
        ("PATCH", f"/threads/{ok}", {"metadata": nested(METADATA_MAX_DEPTH + 1)}),
        ("POST", "/threads/search", {"metadata": nested(METADATA_MAX_DEPTH + 1)}),
        ("POST", f"/threads/{ok}/runs", {"assistant_id": "agent", "metadata": nested(40)}),
        ("POST", "/threads", {"metadata": nested(300)}),  # the 1.8 KB body of the issue
    ):
        detail = probes.refused(method, path, httpx.Request("X", "/", json=body).content)
        assert "deep" in detail, detail
    half = "x" * (METADATA_MAX_BYTES // 2)
    two = json.dumps({"metadata": {"a": half, "b": half}})
    big = probes.refused("POST", "/threads", two)
    assert str(METADATA_MAX_BYTES) in big, big
    # PATCH merges: the merged metadata keeps the same limit, and a refused PATCH changes nothing.
    tid = new_thread(client, metadata={"a": half})
    merged = probes.refused("PATCH", f"/threads/{tid}", json.dumps({"metadata": {"b": half}}))
    assert "merged" in merged and str(METADATA_MAX_BYTES) in merged, merged
    assert client.get(f"/threads/{tid}").json()["metadata"] == {"a": half}
    smaller = client.patch(f"/threads/{tid}", json={"metadata": {"a": "short", "b": half}})
    assert smaller.status_code == 200, smaller.text
    assert smaller.json()["metadata"] == {"a": "short", "b": half}
    assert all_threads_readable(client) >= 2


def test_path_and_query_parameters(client: httpx.Client, probes: Probes) -> None:
    tid = new_thread(client)
    run_id = str(uuid.uuid4())
    operations = client.get("/openapi.json").json()["paths"]
    thread_routes = [
        (method.upper(), path)
        for path, item in operations.items()
        if "{thread_id}" in path
        for method in item
    ]
    assert len(thread_routes) >= 17, thread_routes
    for bad_id in ("abc%00def", "a" * 201, "a%20b", "%ED%A0%80", "x'; DROP", "a%2Fb", "%00"):
        for method, route in thread_routes:
            path = (
                route.replace("{thread_id}", bad_id)
                .replace("{run_id}", run_id)
                .replace("{path}", "x.txt")
            )
            body = '{"assistant_id": "agent"}' if method in ("POST", "PATCH") else None
            detail = probes.refused(method, path, body)
            if "%2F" not in bad_id:  # names another path
                assert "thread_id" in detail, (method, path, detail)
    for bad_run in ("a%00b", "x" * 300, "%ED%A0%80"):
        for suffix in ("", "/join", "/stream"):
            probes.refused("GET", f"/threads/{tid}/runs/{bad_run}{suffix}")
        probes.refused("POST", f"/threads/{tid}/runs/{bad_run}/cancel")
    probes.refused("GET", "/assistants/a%00b", expect=404)
    probes.refused("GET", "/assistants/" + "a" * 300, expect=422)
    runs = f"/threads/{tid}/runs"
    for params in (
        {"status": "a\x00b"},
        {"status": "sleeping"},
        {"offset": str(2**63)},
        {"offset": "-1"},
        {"offset": "9" * 5000},
        {"limit": "0"},
        {"limit": "1e3"},
        {"limit": "\x00"},
    ):
        probes.refused("GET", runs, params=params, expect=422)
    assert probes.send("GET", runs, params={"offset": str(MAX_OFFSET)}).json() == []
    probes.refused("GET", runs, params={"offset": str(MAX_OFFSET + 1)}, expect=422)
    probes.refused("POST", "/threads/search", '{"offset": ' + str(MAX_OFFSET + 1) + "}")
    assert (
        probes.send("POST", "/threads/search", '{"offset": ' + str(MAX_OFFSET) + "}").json() == []
    )
    audit = f"/threads/{tid}/audit"
    for params in ({"after_id": str(2**70)}, {"limit": "99999"}, {"after_id": "\x00"}):
        probes.refused("GET", audit, params=params, expect=422)
    rid = client.post(runs, json={"assistant_id": "agent"}).json()["run_id"]
    assert client.get(f"/threads/{tid}/runs/{rid}/join").status_code == 200
    stream = f"/threads/{tid}/runs/{rid}/stream"
    for headers, params in (
        ({"Last-Event-ID": "abc"}, None),
        ({"Last-Event-ID": "9" * 5000}, None),
        (None, {"last_event_id": "\x00"}),
        (None, {"stream_mode": "a\x00"}),
        (None, {"stream_mode": "debug"}),
    ):
        probes.refused("GET", stream, headers=headers, params=params, expect=422)
    past = probes.send(
        "GET", stream, headers={"Last-Event-ID": "9" * 30}, params={"stream_mode": "values"}
    )
    assert past.status_code == 200 and "event: end" in past.text, past.text
    # (No X-Actor probe: the header is not read; the audit log names the authenticated caller.)
    assert all_threads_readable(client) >= 1


def test_bodies_that_are_not_json_objects(client: httpx.Client, probes: Probes) -> None:
    tid = new_thread(client)
    operations = client.get("/openapi.json").json()["paths"]
    body_routes = [
        (method.upper(), path.replace("{thread_id}", tid))
        for path, item in operations.items()
        for method, operation in item.items()
        if "requestBody" in operation
    ]
    assert len(body_routes) >= 9, body_routes
    bodies: list[tuple[bytes, dict[str, str]]] = [
        (b"\xff\xfe{}", JSON),
        (b"\xef\xbb\xbf{}", JSON),
        (b"{", JSON),
        (b"[]", JSON),
        (b'"text"', JSON),
        (b"null", JSON),
        (b"NaN", JSON),
        (b'{"a": 1} trailing', JSON),
        (b'{"a": "\\u0000"}', {"content-type": "text/plain"}),
        (b"{}", {"content-type": "application/x-www-form-urlencoded"}),
        (b"a=1", {"content-type": "multipart/form-data; boundary=x"}),
        (b"{}", {"content-type": "application/json; charset=latin-1"}),
        (b"[" * 2000 + b"]" * 2000, JSON),
        (b'{"a": ' + b"1" * 5000 + b"}", JSON),
    ]
    for method, path in body_routes:
        for body, headers in bodies:
            probes.send(method, path, body, headers=headers)
        # Every JSON body goes through the same door.
        detail = probes.refused(method, path, b'{"x": [NaN]}', expect=422)
        assert "NaN" in detail, (path, detail)
        detail = probes.refused(method, path, b'{"x": "\\u0000"}', expect=422)
        assert "x: text contains a NUL" in detail, (path, detail)
    assert all_threads_readable(client) >= 1


def test_workspace_paths(server: ServerProcess, client: httpx.Client, probes: Probes) -> None:
    tid = new_thread(client)
    base = f"/threads/{tid}/workspace"
    probes.send("GET", base, expect=200)
    root = Path(server.data_dir) / "workspaces" / tid
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("hello\n")
    (root / "sub").mkdir()
    import os

    os.mkfifo(root / "pipe")
    assert client.get(f"{base}/notes.txt").text == "hello\n"
    for path, status in (
        ("a" * 20_000, 422),
        ("a" * 300, 422),
        ("d/" * 600, 422),
        ("a%00b", 422),
        ("..%2F..%2Fetc%2Fpasswd", 422),
        ("", 422),
        ("sub", 404),
        ("pipe", 404),
        ("missing.txt", 404),
        ("notes.txt/x", 404),
        ("%ED%A0%80", 404),
    ):
        probes.refused("GET", f"{base}/{path}", expect=status)
    listing = client.get(base).json()["files"]
    assert {f["path"] for f in listing} >= {"notes.txt", "sub"}


def test_workspace_file_read_while_it_grows(server: ServerProcess, client: httpx.Client) -> None:
    """A tool appends to a file while clients read it: every read is a complete response whose
    body is what the file held at some moment (a prefix of its final content)."""
    tid = new_thread(client)
    root = Path(server.data_dir) / "workspaces" / tid
    root.mkdir(parents=True)
    target = root / "counter.txt"
    target.write_bytes(b"")
    stop = threading.Event()
    lines = 0

    def append() -> None:
        nonlocal lines
        with target.open("ab", buffering=0) as f:
            while not stop.is_set() and lines < 200_000:
                lines += 1
                f.write(f"{lines} {'x' * 200}\n".encode())
                if lines % 5 == 0:
                    time.sleep(0.001)

    writer = threading.Thread(target=append)
    writer.start()
    bodies = []
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            response = client.get(f"/threads/{tid}/workspace/counter.txt")
            assert response.status_code == 200, response.text
            assert int(response.headers["content-length"]) == len(response.content)
            bodies.append(response.content)
    finally:
        stop.set()
        writer.join()
    final = target.read_bytes()
    assert len(bodies) >= 20, len(bodies)
    assert len({len(b) for b in bodies}) > 5, "the file did not grow while it was read"
    for body in bodies:
        assert final.startswith(body)


def test_openapi_declares_what_the_routes_answer(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's 422 shape, which we never send
    assert schemas["ErrorBody"]["required"] == ["detail"]
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            answers = operation["responses"]
            for status, response in answers.items():
                if status.startswith(("4", "5")):
                    assert response["content"] == error, (where, status)
            if operation.get("parameters") or "requestBody" in operation:
                assert "422" in answers, where
            if "requestBody" in operation:
                assert "413" in answers, where
            if "{thread_id}" in path or "{run_id}" in path or "{assistant_id}" in path:
                assert "404" in answers, where
    # Request schemas accept only what the handlers do.
    run_create = schemas["RunCreate"]["properties"]
    modes = run_create["stream_mode"]["anyOf"][0]["enum"]
    assert modes == ["values", "updates", "custom", "messages", "messages-tuple", "events"]
    approval_modes = schemas["ApprovalBody"]["properties"]["stream_mode"]["anyOf"][0]["enum"]
    assert approval_modes == modes
    assert run_create["multitask_strategy"]["enum"] == [
        "reject",
        "enqueue",
        "interrupt",
        "rollback",
    ]
    search = schemas["ThreadSearch"]["properties"]["offset"]
    assert search["maximum"] == MAX_OFFSET
    # An SSE route answers an event stream, and its errors as JSON.
    stream = document["paths"]["/threads/{thread_id}/runs/stream"]["post"]["responses"]
    assert list(stream["200"]["content"]) == ["text/event-stream"]


@pytest.mark.parametrize(
    "field,value",
    [
        ("input", {"messages": [{"role": "xyz", "content": "hi"}]}),
        ("input", {"messages": [{"role": "user", "content": 5}]}),
        ("input", {"messages": [{"role": "user", "content": {"a": 1}}]}),
        ("input", {"messages": [{}]}),
        ("input", {"messages": [None]}),
        ("input", {"messages": [{"type": "remove", "id": "nope"}]}),
        ("input", {"messages": [{"role": "ai", "content": "", "tool_calls": [{"args": "x"}]}]}),
        ("command", {"update": {"messages": 5}}),
        ("command", {"update": {"messages": [{"role": "user"}]}}),
    ],
)
def test_values_the_graph_state_cannot_take(
    client: httpx.Client, probes: Probes, field: str, value: Any
) -> None:
    """An input or ``command.update`` is saved before any node runs: one its reducer cannot
    read would break every later read of the thread, so it is refused first."""
    tid = new_thread(client)
    ok = client.post(
        f"/threads/{tid}/runs/wait",
        json={"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "hi"}]}},
    )
    assert ok.status_code == 200, ok.text
    for route in ("runs", "runs/wait", "runs/stream"):
        body = json.dumps({"assistant_id": "agent", field: value})
        detail = probes.refused("POST", f"/threads/{tid}/{route}", body, expect=422)
        assert "messages" in detail and "shape" in detail, detail
    for path in ("", "/state", "/runs"):
        assert client.get(f"/threads/{tid}{path}").status_code == 200
    assert client.post(f"/threads/{tid}/history", json={}).status_code == 200
    assert len(client.get(f"/threads/{tid}/runs").json()) == 1
