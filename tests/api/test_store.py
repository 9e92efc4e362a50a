"""Long-term memory (issue 18): the official SDK's ``client.store`` against a real server, a
graph from a ``langgraph.json`` that reads and writes the same store, tenants kept apart with
built-in keys, and hostile input refused with 422 (never a 500)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.api.conftest import FAST
from tests.utils.keys import create_key
from tests.utils.server import ServerProcess, serving

MEMORY_GRAPH = textwrap.dedent(
    '''
    """Remembers a note across threads: the store argument writes, get_store() reads."""
    from typing import TypedDict

    from langchain_core.runnables import RunnableConfig
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore


    class State(TypedDict, total=False):
        note: str
        seen: list


    def user_of(config: RunnableConfig) -> tuple:
        user = (config.get("configurable") or {}).get("langgraph_auth_user_id")
        return (user, "memories") if user else ("memories",)


    async def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> State:
        key = config["configurable"]["thread_id"]
        await store.aput(user_of(config), key, {"note": state["note"], "kind": "note"})
        return {}


    async def recall(state: State, config: RunnableConfig) -> State:
        items = await get_store().asearch(user_of(config), filter={"kind": "note"}, limit=100)
        return {"seen": sorted(i.value["note"] for i in items)}


    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    '''
)


def write_config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "memory_graph.py").write_text(MEMORY_GRAPH)
    config = directory / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"memory": "./memory_graph.py:builder"}}))
    return config


@pytest.fixture(scope="module")
def store_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("store")
    config = write_config(root / "project")
    proc = ServerProcess(module_database_url, root / "data", config=config, name="store", **FAST)
    with serving(proc):
        yield proc


@pytest.fixture
async def client(store_server: ServerProcess) -> AsyncIterator[Any]:
    async with get_client(url=store_server.url) as c:
        yield c


@pytest.fixture
async def http(store_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=store_server.url, timeout=30) as c:
        yield c


async def test_put_get_search_delete_list(client: Any) -> None:
    store = client.store
    await store.put_item(["docs", "u1"], "a", {"title": "A", "n": 1, "kind": "x"})
    await store.put_item(["docs", "u1"], "b", {"title": "B", "n": 5, "kind": "y"})
    await store.put_item(["docs", "u2", "deep"], "c", {"title": "C", "n": 9, "kind": "x"})
    item = await store.get_item(["docs", "u1"], key="a")
    assert item["namespace"] == ["docs", "u1"] and item["key"] == "a"
    assert item["value"] == {"title": "A", "n": 1, "kind": "x"}
    assert item["created_at"] and item["updated_at"]
    assert await store.get_item(["docs", "u1"], key="missing") is None

    found = await store.search_items(["docs"], limit=10)
    assert sorted(i["key"] for i in found["items"]) == ["a", "b", "c"]
    assert "score" in found["items"][0]
    xs = await store.search_items(["docs"], filter={"kind": "x"})
    assert sorted(i["key"] for i in xs["items"]) == ["a", "c"]
    big = await store.search_items(["docs"], filter={"n": {"$gt": 3}, "kind": {"$ne": "y"}})
    assert [i["key"] for i in big["items"]] == ["c"]
    page = await store.search_items(["docs"], limit=1, offset=1)
    assert len(page["items"]) == 1
    assert (await store.search_items(["doc"]))["items"] == []  # a prefix is whole labels

    spaces = (await store.list_namespaces(prefix=["docs"]))["namespaces"]
    assert sorted(spaces) == [["docs", "u1"], ["docs", "u2", "deep"]]
    shallow = (await store.list_namespaces(prefix=["docs"], max_depth=2))["namespaces"]
    assert sorted(shallow) == [["docs", "u1"], ["docs", "u2"]]
    deep = (await store.list_namespaces(suffix=["deep"]))["namespaces"]
    assert deep == [["docs", "u2", "deep"]]

    await store.put_item(["docs", "u1"], "a", {"title": "A2"})  # replaces
    assert (await store.get_item(["docs", "u1"], key="a"))["value"] == {"title": "A2"}
    await store.delete_item(["docs", "u1"], key="a")
    assert await store.get_item(["docs", "u1"], key="a") is None
    await store.delete_item(["docs", "u1"], key="a")  # again: nothing to delete, no error


async def test_a_config_graph_reads_and_writes_the_store(client: Any) -> None:
    await client.store.put_item(["memories"], "from-api", {"note": "api", "kind": "note"})
    seen = []
    for note in ("first", "second"):
        thread = await client.threads.create()
        out = await client.runs.wait(thread["thread_id"], "memory", input={"note": note})
        seen.append(out["seen"])
    assert seen == [["api", "first"], ["api", "first", "second"]]
    found = await client.store.search_items(["memories"], filter={"note": "second"})
    assert [i["value"]["note"] for i in found["items"]] == ["second"]


HOSTILE: list[tuple[str, str, dict[str, Any]]] = [
    ("PUT", "/store/items", {"json": {"namespace": ["a.b"], "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": [""], "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": [], "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": ["langgraph"], "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": ["x" * 300], "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"] * 40, "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": [1], "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": "a", "key": "k", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "", "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k" * 600, "value": {}}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": [1, 2]}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": "text"}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k"}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": {}, "ttl": -1}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": {}, "ttl": 1e30}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": {}, "index": 3}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": {}, "ttl": 1e-300}}),
    ("PUT", "/store/items", {"json": {"namespace": ["a"], "key": "k", "value": {}, "index": [""]}}),
    ("PUT", "/store/items", {"content": b'{"namespace": ["a"], "key": "k\\u0000", "value": {}}'}),
    ("PUT", "/store/items", {"content": b"not json"}),
    ("GET", "/store/items", {"params": {"namespace": "a..b", "key": "k"}}),
    ("PUT", "/store/items", {"json": {"namespace": ["x" * 200] * 3, "key": "k", "value": {}}}),
    ("GET", "/store/items", {"params": {"namespace": "a", "key": "k\x00"}}),
    ("GET", "/store/items", {"params": {"namespace": "a\x00b", "key": "k"}}),
    ("GET", "/store/items", {"params": {"namespace": "a"}}),
    ("GET", "/store/items", {"params": {"namespace": "", "key": "k"}}),
    ("GET", "/store/items", {"params": {"namespace": "langgraph", "key": "k"}}),
    ("GET", "/store/items", {"params": {"namespace": ".".join(["a"] * 40), "key": "k"}}),
    ("GET", "/store/items", {"params": {"namespace": "a", "key": "k", "refresh_ttl": "maybe"}}),
    ("DELETE", "/store/items", {"json": {"namespace": ["a.b"], "key": "k"}}),
    ("DELETE", "/store/items", {"json": {"key": "k"}}),
    ("POST", "/store/items/search", {"json": {"namespace_prefix": ["a.b"]}}),
    ("POST", "/store/items/search", {"json": {"limit": 0}}),
    ("POST", "/store/items/search", {"json": {"limit": 100000}}),
    ("POST", "/store/items/search", {"json": {"offset": -1}}),
    ("POST", "/store/items/search", {"json": {"offset": 2**60}}),
    ("POST", "/store/items/search", {"json": {"filter": {"n": {"$regex": ".*"}}}}),
    ("POST", "/store/items/search", {"json": {"filter": {"n": {}}}}),
    ("POST", "/store/items/search", {"json": {"filter": {"": 1}}}),
    ("POST", "/store/items/search", {"json": {"filter": [1]}}),
    ("POST", "/store/items/search", {"json": {"query": "q" * 10000}}),
    ("POST", "/store/namespaces", {"json": {"prefix": ["a.b"]}}),
    ("POST", "/store/namespaces", {"json": {"suffix": [""]}}),
    ("POST", "/store/namespaces", {"json": {"max_depth": 0}}),
    ("POST", "/store/namespaces", {"json": {"max_depth": 10**6}}),
    ("POST", "/store/namespaces", {"json": {"limit": 0}}),
]


async def test_hostile_input_is_refused_with_422(http: httpx.AsyncClient) -> None:
    for method, path, kwargs in HOSTILE:
        res = await http.request(method, path, **kwargs)
        assert res.status_code == 422, (method, path, kwargs, res.status_code, res.text)
        assert res.json()["detail"], res.text


async def test_odd_but_valid_input_is_stored_as_sent(client: Any, http: httpx.AsyncClient) -> None:
    odd = ["50%_off", "*", "a\\b", "ünï", "'; DROP TABLE store; --"]
    await client.store.put_item(odd, "k_%", {"value": {"nested": [1, None, "x"]}, "": 0})
    item = await client.store.get_item(odd, key="k_%")
    assert item["namespace"] == odd and item["value"]["value"]["nested"] == [1, None, "x"]
    assert (await client.store.search_items(["50%_off"]))["items"][0]["key"] == "k_%"
    assert (await client.store.search_items(["50_off"]))["items"] == []
    assert (await client.store.search_items(["50%"]))["items"] == []
    filtered = await client.store.search_items(odd, filter={"value": {"$eq": {"nested": [1]}}})
    assert filtered["items"] == []
    res = await http.post("/store/namespaces", json={"prefix": ["50%_off", "*"]})
    assert res.status_code == 200 and odd in res.json()["namespaces"]


async def test_tenants_see_only_their_own_items(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "project")
    data = tmp_path / "data"
    proc = make_server(
        database_url, data, config=config, env={"THREADLINE_AUTH": "keys"}, name="store-keys"
    )
    proc.start()
    keys = {who: create_key(data, database_url, who) for who in ("alice", "bob", "al.ice", "al")}
    clients = {who: get_client(url=proc.url, api_key=k) for who, k in keys.items()}
    alice, bob, dotted = clients["alice"].store, clients["bob"].store, clients["al.ice"].store
    try:
        await alice.put_item(["notes"], "secret", {"text": "alice's", "kind": "note"})
        await bob.put_item(["notes"], "mine", {"text": "bob's", "kind": "note"})
        await dotted.put_item(["notes"], "dot", {"text": "dotted", "kind": "note"})
        # "al" + ["ice", "notes"] must not reach the identity "al.ice" (nor the reverse).
        await clients["al"].store.put_item(["ice", "notes"], "fake", {"text": "not al.ice's"})

        got = await alice.get_item(["notes"], key="secret")
        assert got["namespace"] == ["notes"] and got["value"]["text"] == "alice's"
        assert await bob.get_item(["notes"], key="secret") is None
        assert await dotted.get_item(["notes"], key="secret") is None
        assert [i["key"] for i in (await bob.search_items([]))["items"]] == ["mine"]
        assert [i["key"] for i in (await dotted.search_items([]))["items"]] == ["dot"]
        assert [i["key"] for i in (await alice.search_items([]))["items"]] == ["secret"]
        assert (await dotted.list_namespaces())["namespaces"] == [["notes"]]
        assert (await bob.list_namespaces())["namespaces"] == [["notes"]]
        assert (await clients["al"].store.list_namespaces())["namespaces"] == [["ice", "notes"]]
        assert (await bob.list_namespaces(prefix=["*"]))["namespaces"] == [["notes"]]
        assert (await bob.list_namespaces(suffix=["notes"]))["namespaces"] == [["notes"]]
        # Bob deleting "alice's" item deletes nothing of hers.
        await bob.delete_item(["notes"], key="secret")
        assert (await alice.get_item(["notes"], key="secret"))["value"]["text"] == "alice's"

        # A graph run by alice writes under her identity: she sees it, bob does not.
        threads = clients["alice"].threads
        thread = await threads.create()
        out = await clients["alice"].runs.wait(thread["thread_id"], "memory", input={"note": "n"})
        assert out["seen"] == ["n"]
        mine = await alice.search_items(["memories"])
        assert [i["value"]["note"] for i in mine["items"]] == ["n"]
        assert (await bob.search_items(["memories"]))["items"] == []

        async with httpx.AsyncClient(base_url=proc.url, timeout=30) as anonymous:
            res = await anonymous.post("/store/items/search", json={})
            assert res.status_code == 401
    finally:
        for c in clients.values():
            await c.aclose()


STORE_AUTH_PY = """
from langgraph_sdk import Auth

auth = Auth()


@auth.authenticate
async def who(authorization: str | None) -> str:
    assert authorization and authorization.startswith("Bearer ")
    return authorization.removeprefix("Bearer ")


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict):
    value.setdefault("metadata", {})["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.store
async def scope_store(ctx: Auth.types.AuthContext, value: dict):
    namespace = tuple(value["namespace"]) if value.get("namespace") else ()
    if namespace[:1] == ("forbidden",):
        return False
    if not namespace or namespace[0] != ctx.user.identity:
        namespace = (ctx.user.identity, *namespace)
    value["namespace"] = namespace
"""


async def test_a_custom_store_handler_decides(
    make_server: Any, database_url: str, tmp_path: Path
) -> None:
    """``@auth.on.store`` from ``langgraph.json``: LangGraph's own example rewrites namespaces
    to start with the identity; they come back as stored; ``False`` is a 403."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "auth.py").write_text(STORE_AUTH_PY)
    config = project / "langgraph.json"
    config.write_text(json.dumps({"auth": {"path": "./auth.py:auth"}}))
    proc = make_server(database_url, tmp_path / "data", config=config, name="store-custom")
    proc.start()
    async with (
        get_client(url=proc.url, headers={"Authorization": "Bearer alice"}) as alice,
        get_client(url=proc.url, headers={"Authorization": "Bearer bob"}) as bob,
    ):
        await alice.store.put_item(["notes"], "n", {"text": "hers"})
        got = await alice.store.get_item(["notes"], key="n")
        assert got["namespace"] == ["alice", "notes"]
        assert (await alice.store.get_item(["alice", "notes"], key="n"))["key"] == "n"
        assert await bob.store.get_item(["alice", "notes"], key="n") is None
        assert (await bob.store.search_items(["alice"]))["items"] == []
        assert (await bob.store.list_namespaces())["namespaces"] == []
        assert (await alice.store.list_namespaces())["namespaces"] == [["alice", "notes"]]
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await alice.store.put_item(["forbidden"], "k", {})
        assert refused.value.response.status_code == 403
