"""Stored, versioned assistants, as LangGraph Server has them (``api.runs.assistant_service``),
driven
by the official SDK against a real server of a one-file project whose graph echoes what its run
sees: ``config["configurable"]`` and ``runtime.context``.

Create, get, update (a new version each time), versions, set_latest, delete, search and count;
a run of an assistant gets its config and context, the run's own winning; every served graph's
default assistant is ``uuid5(NAMESPACE_GRAPH, graph_id)`` and its name still works as an
assistant id; another tenant's assistant is not found; a body field the server does not know is
a 422 that names it.
"""

from __future__ import annotations

import asyncio
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import NotFoundError

from api.contract.assistants import AssistantVersionsSearch
from api.contract.runs import RunCreate
from api.lifecycle import open_service
from api.platform.errors import NotFound
from api.platform.settings import Settings
from api.runs import assistant_service
from api.runs.assistant_config import default_assistant_id
from api.store import threads
from tests.api.conftest import FAST
from tests.utils.keys import create_key
from tests.utils.runs import sdk_client, wait_status
from tests.utils.server import ServerProcess, serving
from tests.utils.tasks import counter

ECHO_GRAPH = textwrap.dedent(
    '''
    """What a run's node sees of its config and static context."""
    import asyncio
    from typing import Any, TypedDict

    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    KEYS = ("tone", "lang", "model")


    class State(TypedDict, total=False):
        sleep: float
        conf: dict
        ctx: Any
        limit: int


    async def echo(state: State, config: RunnableConfig, runtime: Runtime) -> State:
        await asyncio.sleep(state.get("sleep") or 0)
        conf = config.get("configurable") or {}
        ctx = runtime.context if isinstance(runtime.context, dict) else {}
        return {
            "conf": {k: v for k, v in conf.items() if k in KEYS},
            "ctx": {k: v for k, v in ctx.items() if k in KEYS},
            "limit": config.get("recursion_limit"),
        }


    builder = StateGraph(State)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    graph = builder.compile()
    '''
)
ECHO_DEFAULT = str(uuid.uuid5(uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "echo"))
"""LangGraph Server's id for graph ``echo``'s default assistant."""
ASSISTANT_KEYS = {
    "assistant_id",
    "graph_id",
    "config",
    "context",
    "metadata",
    "name",
    "description",
    "version",
    "created_at",
    "updated_at",
}
"""``langgraph_sdk.schema.Assistant``; a version has the same keys but ``updated_at``."""


def _project(root: Path) -> Path:
    (root / "project").mkdir()
    (root / "project" / "echo_graph.py").write_text(ECHO_GRAPH)
    config = root / "project" / "langgraph.json"
    config.write_text('{"graphs": {"echo": "./echo_graph.py:graph"}}')
    return config


@pytest.fixture(scope="module")
def echo_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The echo project; schedules may fire every 2 s (a test-only resolution)."""
    root = tmp_path_factory.mktemp("assistants")
    env = {"THREADLINE_CRON_MIN_INTERVAL_SECONDS": "2", "THREADLINE_CRON_POLL_SECONDS": "0.2"}
    proc = ServerProcess(
        module_database_url, root / "data", config=_project(root), env=env, name="echo", **FAST
    )
    with serving(proc):
        yield proc


async def _echoed(client: Any, assistant_id: str, **run: Any) -> dict[str, Any]:
    thread = await client.threads.create()
    values: dict[str, Any] = await client.runs.wait(
        thread["thread_id"], assistant_id, input={}, **run
    )
    return {k: values.get(k) for k in ("conf", "ctx", "limit")}


async def test_create_get_update_versions_set_latest_and_delete(echo_server: ServerProcess) -> None:
    async with sdk_client(echo_server.url) as client:
        made = await client.assistants.create(
            "echo",
            config={"configurable": {"tone": "dry"}, "recursion_limit": 7},
            metadata={"team": "a"},
            name="Dry",
        )
        aid = made["assistant_id"]
        assert set(made) == ASSISTANT_KEYS
        assert uuid.UUID(aid) and made["graph_id"] == "echo" and made["version"] == 1
        assert made["name"] == "Dry" and made["description"] is None
        # The configurable is the assistant's context too, as LangGraph Server keeps them.
        assert made["context"] == {"tone": "dry"} and made["metadata"] == {"team": "a"}
        assert await client.assistants.get(aid) == made

        # An update is a new version: a context given is its configurable too, the metadata
        # is merged, what is left out is kept.
        second = await client.assistants.update(
            aid, context={"tone": "wet"}, metadata={"stage": "b"}, description="wetter"
        )
        assert second["version"] == 2 and second["name"] == "Dry"
        assert second["context"] == {"tone": "wet"}
        assert second["config"] == {"configurable": {"tone": "wet"}}
        assert second["metadata"] == {"team": "a", "stage": "b"}
        assert second["description"] == "wetter" and second["created_at"] == made["created_at"]

        versions = await client.assistants.get_versions(aid)
        assert [v["version"] for v in versions] == [2, 1]
        assert set(versions[0]) == ASSISTANT_KEYS - {"updated_at"}
        assert versions[1]["config"] == made["config"]
        assert [v["version"] for v in await client.assistants.get_versions(aid, limit=1)] == [2]
        only = await client.assistants.get_versions(aid, metadata={"stage": "b"})
        assert [v["version"] for v in only] == [2]

        # Back to version 1: its runs get its values again; the next update is version 3.
        back = await client.assistants.set_latest(aid, 1)
        assert back["version"] == 1 and back["config"] == made["config"]
        assert back["context"] == {"tone": "dry"} and back["description"] is None
        assert (await _echoed(client, aid))["conf"] == {"tone": "dry"}
        third = await client.assistants.update(aid, name="Dry again")
        assert third["version"] == 3 and third["config"] == made["config"]
        with pytest.raises(NotFoundError):
            await client.assistants.set_latest(aid, 99)

        await client.assistants.delete(aid)
        for call in (client.assistants.get(aid), client.assistants.get_versions(aid)):
            with pytest.raises(NotFoundError):
                await call
        with pytest.raises(NotFoundError):
            await client.assistants.delete(aid)


async def test_a_run_gets_its_assistants_config_and_context_and_its_own_win(
    echo_server: ServerProcess,
) -> None:
    async with sdk_client(echo_server.url) as client:
        made = await client.assistants.create(
            "echo", context={"tone": "dry", "lang": "en"}, config={"recursion_limit": 9}
        )
        aid = made["assistant_id"]
        both = {"tone": "dry", "lang": "en"}
        assert await _echoed(client, aid) == {"conf": both, "ctx": both, "limit": 9}
        # The run's configurable and context win key by key; its config's top-level keys win.
        mine = {"tone": "dry", "lang": "fr"}
        echoed = await _echoed(
            client, aid, config={"configurable": {"lang": "fr"}, "recursion_limit": 11}
        )
        assert echoed == {"conf": mine, "ctx": mine, "limit": 11}
        wet = {"tone": "wet", "lang": "en", "model": "m"}
        echoed = await _echoed(client, aid, context={"tone": "wet", "model": "m"})
        assert echoed == {"conf": wet, "ctx": wet, "limit": 9}

        # The run names the assistant; its thread is labelled with the graph and assistant.
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], aid, input={})
        assert run["assistant_id"] == aid
        assert run["kwargs"]["config"]["configurable"] == both
        await client.runs.join(thread["thread_id"], run["run_id"])
        labelled = await client.threads.get(thread["thread_id"])
        assert labelled["metadata"] == {"graph_id": "echo", "assistant_id": aid}
        found = await client.threads.search(metadata={"assistant_id": aid})
        assert thread["thread_id"] in [t["thread_id"] for t in found]


async def test_a_graphs_default_assistant_and_its_name(echo_server: ServerProcess) -> None:
    async with sdk_client(echo_server.url) as client:
        [default] = [
            a
            for a in await client.assistants.search(graph_id="echo", limit=100)
            if a["metadata"].get("created_by") == "system"
        ]
        assert default["assistant_id"] == ECHO_DEFAULT
        assert default["name"] == "echo" and default["config"] == {}
        assert await client.assistants.get("echo") == await client.assistants.get(ECHO_DEFAULT)
        schemas = await client.assistants.get_schemas(ECHO_DEFAULT)
        assert schemas["graph_id"] == "echo" and "conf" in schemas["state_schema"]["properties"]
        assert {n["id"] for n in (await client.assistants.get_graph("echo"))["nodes"]} >= {"echo"}
        assert await client.assistants.get_subgraphs(ECHO_DEFAULT) == {}
        # Runs by the graph's name run its default assistant, whose config they get.
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], "echo", input={})
        assert run["assistant_id"] == ECHO_DEFAULT
        changed = await client.assistants.update(
            ECHO_DEFAULT, config={"configurable": {"model": "big"}}
        )
        try:
            assert changed["version"] == 2 and changed["metadata"] == {"created_by": "system"}
            assert (await _echoed(client, "echo"))["ctx"] == {"model": "big"}
        finally:
            await client.assistants.set_latest(ECHO_DEFAULT, 1)
        assert (await _echoed(client, "echo"))["ctx"] == {}


async def test_search_and_count(echo_server: ServerProcess) -> None:
    tag = uuid.uuid4().hex
    async with sdk_client(echo_server.url) as client:
        names = ["beta Bot", "Alpha bot", "gamma"]
        made = [
            await client.assistants.create("echo", name=n, metadata={"tag": tag, "i": i})
            for i, n in enumerate(names)
        ]
        ids = [a["assistant_id"] for a in made]
        found = await client.assistants.search(metadata={"tag": tag})
        assert [a["assistant_id"] for a in found] == ids[::-1]  # newest first
        by_name = await client.assistants.search(
            metadata={"tag": tag}, sort_by="name", sort_order="asc"
        )
        assert [a["name"] for a in by_name] == ["Alpha bot", "beta Bot", "gamma"]
        bots = await client.assistants.search(metadata={"tag": tag}, name="BOT")
        assert sorted(a["name"] for a in bots) == ["Alpha bot", "beta Bot"]
        assert await client.assistants.count(metadata={"tag": tag}) == 3
        assert await client.assistants.count(metadata={"tag": tag}, name="bot") == 2
        assert await client.assistants.count(metadata={"tag": tag, "i": 1}) == 1
        page = await client.assistants.search(
            metadata={"tag": tag}, limit=2, offset=0, response_format="object"
        )
        assert len(page["assistants"]) == 2 and page["next"] == "2"
        rest = await client.assistants.search(
            metadata={"tag": tag}, limit=2, offset=2, response_format="object"
        )
        assert [a["assistant_id"] for a in rest["assistants"]] == [ids[0]]
        assert rest["next"] is None
        picked = await client.assistants.search(
            metadata={"tag": tag, "i": 2}, select=["assistant_id", "version"]
        )
        assert picked == [{"assistant_id": ids[2], "version": 1}]
        graphs = {a["graph_id"] for a in await client.assistants.search(limit=100)}
        assert graphs == {"agent", "echo"}


async def test_deleting_cancels_its_runs_and_may_delete_its_threads(
    echo_server: ServerProcess,
) -> None:
    async with (
        sdk_client(echo_server.url) as client,
        httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http,
    ):
        aid = (await client.assistants.create("echo"))["assistant_id"]
        done = await client.threads.create()
        await client.runs.wait(done["thread_id"], aid, input={})
        busy = await client.threads.create()
        slow = await client.runs.create(busy["thread_id"], aid, input={"sleep": 30})
        await wait_status(http, busy["thread_id"], slow["run_id"], "running")
        cron = await client.crons.create(aid, schedule="0 0 1 1 *")
        assert cron["assistant_id"] == aid

        # A thread to delete that has an active run: refused before anything is deleted.
        res = await http.delete(f"/assistants/{aid}", params={"delete_threads": "true"})
        assert res.status_code == 409, res.text
        assert busy["thread_id"] in res.json()["detail"]
        await client.assistants.get(aid)

        # Without the threads: its active run is cancelled, its runs and threads stay.
        await client.assistants.delete(aid)
        ended = await wait_status(http, busy["thread_id"], slow["run_id"], "interrupted")
        assert ended["assistant_id"] == aid
        assert len(await client.runs.list(done["thread_id"])) == 1
        assert await client.crons.search(assistant_id=aid) == []
        with pytest.raises(NotFoundError):
            await client.runs.create(done["thread_id"], aid, input={})

        # With them: the threads its runs labelled go too.
        other = (await client.assistants.create("echo"))["assistant_id"]
        labelled = await client.threads.create()
        await client.runs.wait(labelled["thread_id"], other, input={})
        await client.assistants.delete(other, delete_threads=True)
        with pytest.raises(NotFoundError):
            await client.threads.get(labelled["thread_id"])
        await client.threads.get(done["thread_id"])  # another assistant's: kept


async def test_a_schedule_of_an_assistant_runs_with_its_config(echo_server: ServerProcess) -> None:
    async with (
        sdk_client(echo_server.url) as client,
        httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http,
    ):
        aid = (await client.assistants.create("echo", context={"tone": "cron"}))["assistant_id"]
        thread = await client.threads.create()
        cron = await client.crons.create_for_thread(
            thread["thread_id"], aid, schedule="*/2 * * * * *", input={}
        )
        assert cron["assistant_id"] == aid and cron["payload"]["assistant_id"] == aid
        try:
            for _ in range(100):
                runs = await client.runs.list(thread["thread_id"])
                if runs and runs[-1]["status"] == "success":
                    break
                await asyncio.sleep(0.2)
        finally:
            await client.crons.delete(cron["cron_id"])
        assert runs[-1]["assistant_id"] == aid, runs
        state = (await http.get(f"/threads/{thread['thread_id']}/state")).json()
        assert state["values"]["ctx"] == {"tone": "cron"}


HOSTILE: list[tuple[str, str, Any, int, str]] = [
    ("POST", "/assistants", {"graph_id": "echo", "colour": "red"}, 422, "colour"),
    ("POST", "/assistants", {"graph_id": "nope"}, 404, "echo"),
    ("POST", "/assistants", {"graph_id": "echo", "config": 5}, 422, "config"),
    ("POST", "/assistants", {"graph_id": "echo", "config": {"configurable": []}}, 422, "config"),
    ("POST", "/assistants", {"graph_id": "echo", "context": "x"}, 422, "context"),
    ("POST", "/assistants", {"graph_id": "echo", "assistant_id": "x"}, 422, "UUID"),
    (
        "POST",
        "/assistants",
        {"graph_id": "echo", "config": {"configurable": {"a": 1}}, "context": {"b": 1}},
        400,
        "both",
    ),
    (
        "POST",
        "/assistants",
        {"graph_id": "echo", "config": {"configurable": {"langgraph_auth_user_id": "x"}}},
        422,
        "reserved",
    ),
    ("POST", "/assistants", {"graph_id": "echo", "context": {"__pregel_x": 1}}, 422, "reserved"),
    ("POST", "/assistants/search", {"graph_ids": ["echo"]}, 422, "graph_ids"),
    ("POST", "/assistants/search", {"graph_id": "nope"}, 404, "echo"),
    ("POST", "/assistants/search", {"sort_by": "secret"}, 422, "sort_by"),
    ("POST", "/assistants/count", {"limit": 1}, 422, "limit"),
    ("GET", "/assistants/not-a-uuid", None, 404, "echo"),
    ("PATCH", "/assistants/0b5e3c1a-7d2f-4e8b-9a61-3f0c2d4e5b6a", {"name": "x"}, 404, "assistant"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "named"), HOSTILE)
async def test_hostile_bodies_are_refused_saying_why(
    echo_server: ServerProcess, method: str, path: str, body: Any, status: int, named: str
) -> None:
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        res = await http.request(method, path, json=body)
    assert res.status_code == status, res.text
    assert named in res.json()["detail"], res.text


async def test_an_assistant_body_cannot_loosen_the_agents_policy_or_grow_unbounded(
    echo_server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        loose = {"configurable": {"approval_policy": {"*": "auto"}}}
        res = await http.post("/assistants", json={"graph_id": "agent", "config": loose})
        assert res.status_code == 403, res.text
        assert "only tighten" in res.json()["detail"]
        aid = (await http.post("/assistants", json={"graph_id": "agent"})).json()["assistant_id"]
        res = await http.patch(f"/assistants/{aid}", json={"context": loose["configurable"]})
        assert res.status_code == 403, res.text
        res = await http.patch(f"/assistants/{aid}", json={"flavour": 1})
        assert res.status_code == 422 and "flavour" in res.json()["detail"], res.text
        huge = {"graph_id": "echo", "context": {"blob": "x" * 2_000_000}}
        assert (await http.post("/assistants", json=huge)).status_code == 413
        # Each half of the metadata fits; merged into the assistant's, they do not.
        for half, status in (("k", 200), ("j", 422)):
            metadata = {f"{half}{i}": "x" * 1000 for i in range(40)}
            res = await http.patch(f"/assistants/{aid}", json={"metadata": metadata})
            assert res.status_code == status, res.text
        assert "merged into the assistant's" in res.json()["detail"], res.text
        res = await http.post(
            "/assistants", json={"graph_id": "echo", "assistant_id": aid, "if_exists": "raise"}
        )
        assert res.status_code == 409, res.text
        res = await http.post(
            "/assistants",
            json={"graph_id": "echo", "assistant_id": aid, "if_exists": "do_nothing"},
        )
        assert res.status_code == 200 and res.json()["graph_id"] == "agent", res.text


async def test_another_tenants_assistant_is_not_found(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    proc = make_server(
        database_url,
        data,
        config=_project(tmp_path),
        env={"THREADLINE_AUTH": "keys"},
        name="assistant-keys",
    )
    proc.start()
    alice_key = await asyncio.to_thread(create_key, data, database_url, "alice")
    bob_key = await asyncio.to_thread(create_key, data, database_url, "bob")
    async with (
        sdk_client(proc.url, api_key=alice_key) as alice,
        sdk_client(proc.url, api_key=bob_key) as bob,
        httpx.AsyncClient(base_url=proc.url, headers={"x-api-key": bob_key}, timeout=30) as http,
    ):
        aid = (await alice.assistants.create("echo", context={"tone": "alice's"}))["assistant_id"]
        for method, path, body in [
            ("GET", f"/assistants/{aid}", None),
            ("PATCH", f"/assistants/{aid}", {"name": "bob's now"}),
            ("DELETE", f"/assistants/{aid}", None),
            ("POST", f"/assistants/{aid}/versions", {}),
            ("POST", f"/assistants/{aid}/latest", {"version": 1}),
            ("GET", f"/assistants/{aid}/graph", None),
            ("GET", f"/assistants/{aid}/schemas", None),
            ("POST", "/runs/wait", {"assistant_id": aid, "input": {}}),
            ("POST", "/runs/crons", {"assistant_id": aid, "schedule": "0 0 1 1 *"}),
        ]:
            res = await http.request(method, path, json=body)
            assert res.status_code == 404, (method, path, res.text)
        assert aid not in [a["assistant_id"] for a in await bob.assistants.search(limit=100)]
        # Both see and run the served graphs' defaults; only the operator changes those.
        for client in (alice, bob):
            ids = {a["assistant_id"] for a in await client.assistants.search(limit=100)}
            assert ECHO_DEFAULT in ids
        assert await bob.assistants.count() == 2
        assert await alice.assistants.count() == 3
        assert (await _echoed(bob, "echo"))["ctx"] == {}
        res = await http.patch(f"/assistants/{ECHO_DEFAULT}", json={"name": "mine"})
        assert res.status_code == 403 and "POST /assistants" in res.json()["detail"], res.text
        # alice's own assistant is hers to run and change.
        assert (await _echoed(alice, aid))["ctx"] == {"tone": "alice's"}
        assert (await alice.assistants.update(aid, name="renamed"))["version"] == 2


AUTH_PY = textwrap.dedent(
    """
    from langgraph_sdk import Auth

    auth = Auth()


    @auth.authenticate
    async def who(authorization: str | None) -> str:
        assert authorization and authorization.startswith("Bearer ")
        return authorization.removeprefix("Bearer ")


    @auth.on
    async def owner_only(ctx: Auth.types.AuthContext, value: dict):
        value.setdefault("metadata", {})
        if value["metadata"] is None:
            value["metadata"] = {}
        value["metadata"]["owner"] = ctx.user.identity
        return {"owner": ctx.user.identity}


    @auth.on.assistants.delete
    async def keep_assistants(ctx: Auth.types.AuthContext, value: dict):
        return False
    """
)


async def test_auth_handlers_decide_on_assistants(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    """``@auth.on`` handlers of a ``langgraph.json``, as on LangGraph Server: their filter is
    matched against the assistant's metadata (the served graphs' defaults, whose metadata has
    no owner, are out of the listings, yet their graphs' names still run), and a handler that
    returns False refuses (403)."""
    config = _project(tmp_path)
    (config.parent / "auth.py").write_text(AUTH_PY)
    config.write_text(
        '{"graphs": {"echo": "./echo_graph.py:graph"}, "auth": {"path": "./auth.py:auth"}}'
    )
    proc = make_server(database_url, tmp_path / "data", config=config, name="assistant-auth")
    proc.start()
    async with (
        sdk_client(proc.url, headers={"Authorization": "Bearer alice"}) as alice,
        sdk_client(proc.url, headers={"Authorization": "Bearer bob"}) as bob,
    ):
        made = await alice.assistants.create("echo", context={"tone": "mine"})
        aid = made["assistant_id"]
        assert made["metadata"] == {"owner": "alice"}
        assert [a["assistant_id"] for a in await alice.assistants.search(limit=100)] == [aid]
        assert await bob.assistants.search(limit=100) == []
        for call in (
            bob.assistants.get(aid),
            bob.assistants.update(aid, name="bob's"),
            bob.assistants.get_versions(aid),
            bob.runs.create(None, aid, input={}),
        ):
            with pytest.raises(NotFoundError):
                await call
        assert (await _echoed(bob, "echo"))["ctx"] == {}
        assert (await _echoed(alice, aid))["ctx"] == {"tone": "mine"}
        async with httpx.AsyncClient(
            base_url=proc.url, headers={"Authorization": "Bearer alice"}, timeout=30
        ) as http:
            res = await http.delete(f"/assistants/{aid}")
        assert res.status_code == 403, res.text
        assert (await alice.assistants.get(aid))["version"] == 1


async def test_a_deleted_default_is_not_found_until_start_up_makes_it_again(
    settings: Settings, runtime: Any
) -> None:
    """As on LangGraph Server, a graph's default may be deleted (without authentication); runs
    by the graph's name are then a 404 that says so, queueing nothing, until a start-up makes
    it again (once, whichever replica starts first)."""
    body = RunCreate(assistant_id="agent", input=counter(1), if_not_exists="create")
    async with open_service(settings, runtime=runtime, workers=False) as svc:
        await svc.create_run(str(uuid.uuid4()), body)
        await assistant_service.delete(svc, "agent", delete_threads=False)
        missing = str(uuid.uuid4())
        with pytest.raises(NotFound, match="deleted"):
            await svc.create_run(missing, body)
        async with runtime.pool.connection() as conn:
            assert await threads.get(conn, missing) is None
    async with open_service(settings, runtime=runtime, workers=False) as svc:
        run = await svc.create_run(missing, body)
        assert run["assistant_id"] == default_assistant_id("agent")
        versions = await assistant_service.versions(svc, "agent", AssistantVersionsSearch())
        assert [v["version"] for v in versions] == [1]


async def test_a_tenants_assistant_at_a_defaults_id_is_never_the_graphs_default(
    settings: Settings, runtime: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An assistant made at the id a graph's default gets (before the graph is served, or after
    its default was deleted) is its creator's: runs by the graph's name never use its config,
    and start-up says the id is taken instead of adopting it."""
    from api.contract.assistants import AssistantCreate

    body = RunCreate(assistant_id="agent", input=counter(1), if_not_exists="create")
    async with open_service(settings, runtime=runtime, workers=False) as svc:
        await assistant_service.delete(svc, "agent", delete_threads=False)
        await assistant_service.create(
            svc,
            AssistantCreate(
                assistant_id=default_assistant_id("agent"),
                graph_id="agent",
                config={"configurable": {"squatter": True}},
            ),
        )
    async with open_service(settings, runtime=runtime, workers=False) as svc:
        with pytest.raises(NotFound, match="taken by an assistant that is not"):
            await svc.create_run(str(uuid.uuid4()), body)
    assert any("is taken by a tenant's assistant" in m for m in caplog.messages)
