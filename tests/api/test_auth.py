"""Who is asking (issue 13): custom auth from ``langgraph.json``, built-in keys, tenants, and the
browser rules, against real servers driven by the official SDK and plain HTTP.

alice and bob are two tenants: bob's every request on alice's threads, runs, streams, approvals,
audit and files is 404 (or absent from listings); no credentials is 401 everywhere but ``/ok``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_client

from tests.conftest import scrubbed_environ
from tests.utils.keys import create_key, threadline
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet

AUTH_PY = """
from langgraph_sdk import Auth

VALID_TOKENS = {
    "alice-token": {"id": "alice", "name": "Alice"},
    "bob-token": {"id": "bob", "name": "Bob"},
}

auth = Auth()


@auth.authenticate
async def get_current_user(authorization: str | None) -> Auth.types.MinimalUserDict:
    assert authorization
    scheme, token = authorization.split()
    assert scheme.lower() == "bearer"
    if token not in VALID_TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    user = VALID_TOKENS[token]
    return {"identity": user["id"], "display_name": user["name"]}


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict):
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    if metadata is None:
        value["metadata"] = metadata = {}
    metadata.update(filters)
    return filters
"""
WHOAMI_PY = """
from typing import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    who: str
    uid: str
    permissions: list


def whoami(state: State, config: RunnableConfig) -> State:
    user = config["configurable"]["langgraph_auth_user"]
    return {
        "who": user["identity"],
        "uid": config["configurable"]["langgraph_auth_user_id"],
        "permissions": list(config["configurable"]["langgraph_auth_permissions"]),
    }


builder = StateGraph(State)
builder.add_node("whoami", whoami)
builder.add_edge(START, "whoami")
builder.add_edge("whoami", END)
graph = builder.compile()
"""
GREET = greet("Ada")
COUNTER = counter(1)
SERVER_ENV = {"THREADLINE_CORS_ORIGINS": json.dumps(["http://ui.example:3000"])}
"""For the module's ``server`` (tests/api/conftest.py), which the browser-rule tests use."""


def headers_for(token: str | None, scheme: str = "bearer") -> dict[str, str]:
    if token is None:
        return {}
    return {"Authorization": f"Bearer {token}"} if scheme == "bearer" else {"x-api-key": token}


async def alice_flow(url: str, alice: dict[str, str]) -> dict[str, Any]:
    """alice starts a greet run that stops for approval; returns her ids."""
    async with httpx.AsyncClient(base_url=url, headers=alice, timeout=60) as http:
        res = await http.post("/threads", json={"metadata": {"topic": "x"}})
        assert res.status_code == 200, res.text
        tid = res.json()["thread_id"]
        res = await http.post(
            f"/threads/{tid}/runs/wait",
            json={"assistant_id": "agent", "input": GREET},
        )
        assert res.status_code == 200, res.text
        runs = (await http.get(f"/threads/{tid}/runs")).json()
        state = (await http.get(f"/threads/{tid}/state")).json()
        [interrupt] = state["interrupts"]
        return {"thread_id": tid, "run_id": runs[0]["run_id"], "interrupt_id": interrupt["id"]}


def bobs_probes(ids: dict[str, Any]) -> list[tuple[str, str, dict[str, Any] | None]]:
    tid, rid, iid = ids["thread_id"], ids["run_id"], ids["interrupt_id"]
    return [
        ("GET", f"/threads/{tid}", None),
        ("PATCH", f"/threads/{tid}", {"metadata": {"owner": "bob"}}),
        ("GET", f"/threads/{tid}/state", None),
        ("POST", f"/threads/{tid}/history", {}),
        ("GET", f"/threads/{tid}/runs", None),
        ("GET", f"/threads/{tid}/runs/{rid}", None),
        ("GET", f"/threads/{tid}/runs/{rid}/join", None),
        ("GET", f"/threads/{tid}/runs/{rid}/stream", None),
        ("POST", f"/threads/{tid}/runs/{rid}/cancel", None),
        ("POST", f"/threads/{tid}/runs", {"assistant_id": "agent", "input": COUNTER}),
        (
            "POST",
            f"/threads/{tid}/runs",
            {"assistant_id": "agent", "input": COUNTER, "if_not_exists": "create"},
        ),
        ("POST", f"/threads/{tid}/runs/wait", {"assistant_id": "agent", "input": None}),
        (
            "POST",
            f"/threads/{tid}/runs/stream",
            {
                "assistant_id": "agent",
                "command": {"resume": {iid: {"decisions": [{"type": "approve"}]}}},
            },
        ),
        (
            "POST",
            f"/threads/{tid}/approvals",
            {"interrupt_id": iid, "decisions": [{"type": "approve"}]},
        ),
        ("GET", f"/threads/{tid}/audit", None),
        ("GET", f"/threads/{tid}/workspace", None),
        ("GET", f"/threads/{tid}/workspace/greeting.txt", None),
        ("DELETE", f"/threads/{tid}", None),
    ]


async def check_isolation(url: str, alice: dict[str, str], bob: dict[str, str]) -> None:
    ids = await alice_flow(url, alice)
    tid = ids["thread_id"]
    async with httpx.AsyncClient(base_url=url, headers=bob, timeout=60) as http:
        for method, path, body in bobs_probes(ids):
            res = await http.request(method, path, json=body)
            assert res.status_code == 404, (method, path, res.status_code, res.text)
        # Listings never show alice's thread.
        found = (await http.post("/threads/search", json={"limit": 100})).json()
        assert tid not in [t["thread_id"] for t in found]
        found = (await http.post("/threads/search", json={"metadata": {"topic": "x"}})).json()
        assert found == []
        res = await http.post("/threads/prune", json={"thread_ids": [tid]})
        assert res.status_code in (200, 404), res.text
        # A client-chosen id cannot reach into alice's thread.
        res = await http.post("/threads", json={"thread_id": tid, "if_exists": "do_nothing"})
        assert res.status_code in (404, 409), res.text
    async with httpx.AsyncClient(base_url=url, headers=alice, timeout=60) as http:
        # alice's thread is intact: still interrupted, and her approval works.
        thread = (await http.get(f"/threads/{tid}")).json()
        assert thread["status"] == "interrupted", thread
        res = await http.post(
            f"/threads/{tid}/approvals",
            json={"interrupt_id": ids["interrupt_id"], "decisions": [{"type": "approve"}]},
        )
        assert res.status_code == 200, res.text
        await http.get(f"/threads/{tid}/runs/{res.json()['run_id']}/join")
        text = (await http.get(f"/threads/{tid}/workspace/greeting.txt")).text
        assert text == "Hello, Ada!\n"
        audit = (await http.get(f"/threads/{tid}/audit")).json()
        decisions = [r for r in audit if r["kind"] == "decision"]
        assert [r["actor"] for r in decisions] == ["alice"], audit
        # An actor header sets nothing.
        found = (await http.post("/threads/search", json={"limit": 100})).json()
        assert tid in [t["thread_id"] for t in found]


async def check_unauthenticated(url: str, bad: dict[str, str]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        assert (await http.get("/ok")).status_code == 200
        for headers in ({}, bad):
            for method, path in [
                ("GET", "/info"),
                ("GET", "/tasks"),
                ("POST", "/threads"),
                ("POST", "/threads/search"),
                ("GET", "/threads/x"),
                ("GET", "/openapi.json"),
                ("POST", "/assistants/search"),
            ]:
                res = await http.request(method, path, headers=headers, json={})
                assert res.status_code == 401, (method, path, headers, res.text)
                assert res.json()["detail"]


async def test_custom_auth_from_langgraph_json(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "auth.py").write_text(AUTH_PY)
    (tmp_path / "whoami.py").write_text(WHOAMI_PY)
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps({"graphs": {"whoami": "./whoami.py:graph"}, "auth": {"path": "./auth.py:auth"}})
    )
    proc = make_server(database_url, tmp_path / "data", config=config, name="custom-auth")
    proc.start()
    alice, bob = headers_for("alice-token"), headers_for("bob-token")
    await check_unauthenticated(proc.url, headers_for("mallory-token"))
    await check_isolation(proc.url, alice, bob)
    # The official SDK, as alice: threads and streams work with her token.
    async with (
        get_client(url=proc.url, headers=alice) as client,
        get_client(url=proc.url, headers=bob) as bob_client,
    ):
        thread = await client.threads.create()
        assert thread["metadata"]["owner"] == "alice"
        parts = [
            p
            async for p in client.runs.stream(
                thread["thread_id"], "agent", input=COUNTER, stream_mode=["updates"]
            )
        ]
        assert parts[-1].event == "end" and parts[-1].data["status"] == "success"
        assert thread["thread_id"] not in [
            t["thread_id"] for t in await bob_client.threads.search(limit=100)
        ]
    async with httpx.AsyncClient(base_url=proc.url, headers=alice, timeout=30) as http:
        info = (await http.get("/info")).json()
        assert info["auth"] == "custom"
        # A graph sees the caller as LangGraph Server shows it, and a client cannot forge it.
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        res = await http.post(
            f"/threads/{tid}/runs/wait", json={"assistant_id": "whoami", "input": {}}
        )
        assert res.status_code == 200, res.text
        assert res.json() == {"who": "alice", "uid": "alice", "permissions": []}
        forged = {"configurable": {"langgraph_auth_user": {"identity": "bob"}}}
        res = await http.post(
            f"/threads/{tid}/runs/wait",
            json={"assistant_id": "whoami", "input": {}, "config": forged},
        )
        assert res.status_code == 422, res.text


async def cli(data_dir: Path, database_url: str, *args: str) -> str:
    return await asyncio.to_thread(threadline, data_dir, database_url, *args)


async def cli_key(data_dir: Path, database_url: str, identity: str, *perms: str) -> str:
    return await asyncio.to_thread(create_key, data_dir, database_url, identity, *perms)


async def test_built_in_keys(make_server: Any, database_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = make_server(database_url, data, env={"THREADLINE_AUTH": "keys"}, name="keys")
    proc.start()
    alice_key = await cli_key(data, database_url, "alice")
    bob_key = await cli_key(data, database_url, "bob")
    reviewer_key = await cli_key(data, database_url, "rita", "threadline:review")
    alice, bob = headers_for(alice_key, "x-api-key"), headers_for(bob_key, "bearer")
    await check_unauthenticated(proc.url, headers_for("tl_0000_wrong", "x-api-key"))
    await check_isolation(proc.url, alice, bob)
    # A reviewer approves a thread she does not own; the audit log names her.
    ids = await alice_flow(proc.url, alice)
    async with httpx.AsyncClient(
        base_url=proc.url, headers=headers_for(reviewer_key, "x-api-key"), timeout=60
    ) as http:
        res = await http.post(
            f"/threads/{ids['thread_id']}/approvals",
            json={"interrupt_id": ids["interrupt_id"], "decisions": [{"type": "approve"}]},
            headers={"X-Actor": "someone-else"},
        )
        assert res.status_code == 200, res.text
        await http.get(f"/threads/{ids['thread_id']}/runs/{res.json()['run_id']}/join")
        audit = (await http.get(f"/threads/{ids['thread_id']}/audit")).json()
        assert [r["actor"] for r in audit if r["kind"] == "decision"] == ["rita"]
        info = (await http.get("/info")).json()
        assert info["auth"] == "keys"
    # Listing and revoking.
    key_id = bob_key.split("_")[1]
    listed = await cli(data, database_url, "keys", "list")
    assert key_id in listed and "bob" in listed and bob_key not in listed
    await cli(data, database_url, "keys", "revoke", key_id)
    async with httpx.AsyncClient(base_url=proc.url, headers=bob, timeout=30) as http:
        assert (await http.post("/threads/search", json={})).status_code == 401


async def test_an_approve_permission_binds_owners_too(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    proc = make_server(
        database_url,
        data,
        env={"THREADLINE_AUTH": "keys", "THREADLINE_APPROVE_PERMISSION": "approve"},
        name="approve-permission",
    )
    proc.start()
    owner = headers_for(await cli_key(data, database_url, "olga"), "x-api-key")
    approver = headers_for(await cli_key(data, database_url, "olga", "approve"), "x-api-key")
    ids = await alice_flow(proc.url, owner)
    async with httpx.AsyncClient(base_url=proc.url, headers=owner, timeout=60) as http:
        res = await http.post(
            f"/threads/{ids['thread_id']}/approvals",
            json={"interrupt_id": ids["interrupt_id"], "decisions": [{"type": "approve"}]},
        )
        assert res.status_code == 403, res.text
        assert "'approve' permission" in res.json()["detail"]
    async with httpx.AsyncClient(base_url=proc.url, headers=approver, timeout=60) as http:
        res = await http.post(
            f"/threads/{ids['thread_id']}/approvals",
            json={"interrupt_id": ids["interrupt_id"], "decisions": [{"type": "approve"}]},
        )
        assert res.status_code == 200, res.text


# -- browser rules ----------------------------------------------------------------------------


async def test_cors_preflight_and_allowed_origin(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        res = await http.options(
            "/threads/search",
            headers={
                "Origin": "http://ui.example:3000",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-api-key,authorization",
            },
        )
        assert res.status_code == 200, res.text
        assert res.headers["access-control-allow-origin"] == "http://ui.example:3000"
        assert "x-api-key" in res.headers["access-control-allow-headers"].lower()
        assert res.headers.get("access-control-allow-credentials") == "true"
        res = await http.post(
            "/threads/search", json={}, headers={"Origin": "http://ui.example:3000"}
        )
        assert res.status_code == 200, res.text
        assert res.headers["access-control-allow-origin"] == "http://ui.example:3000"


async def test_a_foreign_origin_changes_nothing(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        tid = (await http.post("/threads", json={})).json()["thread_id"]
        run = (
            await http.post(
                f"/threads/{tid}/runs",
                json={"assistant_id": "agent", "input": GREET},
            )
        ).json()
        evil = {"Origin": "http://evil.example"}
        res = await http.options(
            "/threads", headers={**evil, "Access-Control-Request-Method": "POST"}
        )
        assert "access-control-allow-origin" not in res.headers
        for method, path in [
            ("POST", f"/threads/{tid}/runs/{run['run_id']}/cancel"),
            ("GET", f"/threads/{tid}/runs/{run['run_id']}/stream?cancel_on_disconnect=true"),
            ("DELETE", f"/threads/{tid}"),
            ("POST", "/threads"),
            ("GET", f"/threads/{tid}"),
        ]:
            res = await http.request(method, path, headers=evil, json={})
            assert res.status_code == 403, (method, path, res.text)
            assert "THREADLINE_CORS_ORIGINS" in res.json()["detail"]
        # Same-origin requests (the page's own) pass.
        own = {"Origin": server.url}
        assert (await http.get(f"/threads/{tid}", headers=own)).status_code == 200


async def test_host_is_checked_against_dns_rebinding(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        res = await http.get("/info", headers={"Host": "attacker.example"})
        assert res.status_code == 400, res.text
        assert "THREADLINE_ALLOWED_HOSTS" in res.json()["detail"]
        res = await http.get("/info", headers={"Host": f"localhost:{server.port}"})
        assert res.status_code == 200
        info = res.json()
        assert info["auth"] == "none"


def test_without_auth_a_public_address_refuses_to_start(tmp_path: Path, database_url: str) -> None:
    env = scrubbed_environ()
    env.update({"DATABASE_URL": database_url, "THREADLINE_DATA_DIR": str(tmp_path / "data")})
    out = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "THREADLINE_INSECURE_NO_AUTH" in out.stderr + out.stdout
