"""A project's ``langgraph.json`` ``"http"`` (``api.project.http_config``, ``api.http.custom_app``,
``api.project.route_groups``), against real servers of a project folder, as LangGraph Server serves
it: the project's FastAPI app answers beside the API, shadowing ours but ``/ok``; its middleware
wraps every route; its lifespan runs; a disabled group answers 404; CORS is the config's; the
API's routes keep their authentication, the project's have none unless
``enable_custom_route_auth`` (then, with ``middleware_order: auth_first``, its middleware runs
after authentication)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from api.http.custom_app import load_app
from api.project.graphs import GraphConfigError
from api.project.http_config import read_http
from api.project.route_groups import groups_of
from tests.api.conftest import FAST
from tests.utils.server import ServerProcess, ServerStartError, serving

GRAPH_PY = textwrap.dedent(
    """
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph


    class State(TypedDict, total=False):
        n: int


    def bump(state: State) -> State:
        return {"n": state.get("n", 0) + 1}


    builder = StateGraph(State)
    builder.add_node("bump", bump)
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    graph = builder.compile()
    """
)
AUTH_PY = textwrap.dedent(
    """
    from langgraph_sdk import Auth

    auth = Auth()


    @auth.authenticate
    async def authenticate(authorization: str | None) -> str:
        if authorization != "Bearer ada-token":
            raise Auth.exceptions.HTTPException(status_code=401, detail="Who are you?")
        return "ada"
    """
)
APP_PY = textwrap.dedent(
    """
    import os
    from contextlib import asynccontextmanager
    from pathlib import Path

    from fastapi import FastAPI, Request, WebSocket

    MARKS = Path(__file__).parent / "marks.txt"


    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.started = os.environ["PROJECT_GREETING"]  # the config's "env" is loaded
        with MARKS.open("a") as marks:
            marks.write("started\\n")
        yield
        with MARKS.open("a") as marks:
            marks.write("stopped\\n")


    app = FastAPI(lifespan=lifespan)


    @app.middleware("http")
    async def stamp(request: Request, call_next):
        response = await call_next(request)
        response.headers["x-project-middleware"] = request.url.path
        return response


    @app.get("/custom/hello")
    async def hello(request: Request) -> dict:
        return {"hello": request.app.state.started}


    @app.get("/custom/whoami")
    async def whoami(request: Request) -> dict:
        user = request.user if "user" in request.scope else None
        return {"identity": user.identity if user is not None else None}


    @app.websocket("/custom/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("hi")
        await websocket.close()


    @app.get("/info")
    async def info() -> dict:
        return {"custom": "info"}


    @app.get("/ok")
    async def ok() -> dict:
        return {"custom": "ok"}
    """
)
ALLOWED = "http://allowed.example"
CORS = {
    "allow_origins": [ALLOWED],
    "allow_methods": ["GET", "POST"],
    "allow_headers": ["authorization", "content-type"],
    "allow_credentials": True,
    "expose_headers": ["x-project-middleware"],
    "max_age": 77,
}
TOKEN = {"Authorization": "Bearer ada-token"}


def write_project(root: Path, http: dict[str, Any]) -> Path:
    """A project in ``root``: a graph, a custom auth, the FastAPI app above, this ``http``."""
    root.mkdir(parents=True)
    (root / "graph.py").write_text(GRAPH_PY)
    (root / "auth.py").write_text(AUTH_PY)
    (root / "app.py").write_text(APP_PY)
    config = {
        "graphs": {"bump": "./graph.py:graph"},
        "auth": {"path": "./auth.py:auth"},
        "env": {"PROJECT_GREETING": "from the project's env"},
        "http": {"app": "./app.py:app", **http},
    }
    (root / "langgraph.json").write_text(json.dumps(config))
    return root / "langgraph.json"


@pytest.fixture(scope="module")
def project_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("http")
    config = write_project(root / "project", {"disable_store": True, "cors": CORS})
    proc = ServerProcess(module_database_url, root / "data", config=config, name="http", **FAST)
    with serving(proc):
        yield proc


@pytest.fixture
async def http(project_server: ServerProcess) -> Any:
    async with httpx.AsyncClient(base_url=project_server.url, timeout=30) as client:
        yield client


async def test_the_projects_routes_answer_without_credentials(http: httpx.AsyncClient) -> None:
    hello = await http.get("/custom/hello")
    assert hello.status_code == 200, hello.text
    # Its lifespan ran (in the project's app, whose state its routes read), after the env.
    assert hello.json() == {"hello": "from the project's env"}
    assert hello.headers["x-project-middleware"] == "/custom/hello"
    # Not authenticated: no caller on the request.
    assert (await http.get("/custom/whoami", headers=TOKEN)).json() == {"identity": None}


async def test_the_projects_websocket_routes_keep_the_origin_check(
    project_server: ServerProcess,
) -> None:
    ws_url = project_server.url.replace("http://", "ws://") + "/custom/ws"
    async with websockets.connect(ws_url) as ws:  # no credentials needed: not custom route auth
        assert await ws.recv() == "hi"
    with pytest.raises(websockets.InvalidStatus):
        async with websockets.connect(ws_url, origin=websockets.Origin("http://evil.example")):
            pass


def test_an_approval_is_in_the_runs_group_too() -> None:
    """It queues the run that answers the interrupt: ``disable_runs`` turns it off as well."""
    assert groups_of("/threads/t/approvals") == {"threads", "runs"}
    assert groups_of("/threads/t/mcp") == {"threads", "mcp"}
    assert groups_of("/threads/t/audit") == {"threads"}


async def test_the_projects_routes_shadow_the_apis_but_not_ok(http: httpx.AsyncClient) -> None:
    assert (await http.get("/info")).json() == {"custom": "info"}
    ok = await http.get("/ok")
    assert ok.json() == {"ok": True, "database": "up"}
    assert ok.headers["x-project-middleware"] == "/ok"  # its middleware wraps ours too


async def test_the_apis_routes_keep_their_authentication(http: httpx.AsyncClient) -> None:
    refused = await http.post("/threads", json={})
    assert refused.status_code == 401, refused.text
    assert refused.headers["x-project-middleware"] == "/threads"  # middleware_first: outside
    created = await http.post("/threads", json={}, headers=TOKEN)
    assert created.status_code == 200, created.text
    thread_id = created.json()["thread_id"]
    run = await http.post(
        f"/threads/{thread_id}/runs/wait", json={"assistant_id": "bump", "input": {}}, headers=TOKEN
    )
    assert run.json() == {"n": 1}, run.text


async def test_a_disabled_group_is_404_and_out_of_the_document(http: httpx.AsyncClient) -> None:
    body = {"namespace": ["a"], "key": "k", "value": {"v": 1}}
    stored = await http.put("/store/items", json=body, headers=TOKEN)
    assert stored.status_code == 404, stored.text
    listed = await http.post("/store/namespaces", json={}, headers=TOKEN)
    assert listed.status_code == 404, listed.text
    paths = (await http.get("/openapi.json", headers=TOKEN)).json()["paths"]
    assert not [p for p in paths if p.startswith("/store")]
    assert "/threads" in paths


async def test_cors_is_the_configs(http: httpx.AsyncClient) -> None:
    preflight = {"Access-Control-Request-Method": "POST"}
    allowed = await http.options("/threads", headers={"Origin": ALLOWED, **preflight})
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    assert allowed.headers["access-control-allow-credentials"] == "true"
    assert allowed.headers["access-control-max-age"] == "77"
    assert set(allowed.headers["access-control-allow-methods"].split(", ")) == {"GET", "POST"}
    other = await http.options("/threads", headers={"Origin": "http://evil.example", **preflight})
    assert "access-control-allow-origin" not in other.headers
    assert other.status_code == 400
    # A method the config does not allow is refused even from the allowed origin.
    delete = {"Origin": ALLOWED, "Access-Control-Request-Method": "DELETE"}
    assert (await http.options("/threads/x", headers=delete)).status_code == 400

    # The requests themselves: the allowed origin passes the door; another does not.
    created = await http.post("/threads", json={}, headers={"Origin": ALLOWED, **TOKEN})
    assert created.status_code == 200, created.text
    assert created.headers["access-control-allow-origin"] == ALLOWED
    assert created.headers["access-control-expose-headers"] == "x-project-middleware"
    refused = await http.post("/threads", json={}, headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403, refused.text


async def test_custom_route_auth_and_auth_first(
    tmp_path: Path, module_database_url: str, make_server: Callable[..., ServerProcess]
) -> None:
    """``enable_custom_route_auth``: the project's routes need the API's credentials (and see
    the caller); ``auth_first``: its middleware runs after authentication, so a refused
    request never reaches it; with ``disable_meta``, ``/ok``, ``/docs`` and ``/openapi.json``
    are the project's to take (the API's are gone)."""
    http_config = {
        "enable_custom_route_auth": True,
        "middleware_order": "auth_first",
        "disable_meta": True,
        "disable_webhooks": True,
    }
    config = write_project(tmp_path / "project", http_config)
    proc = make_server(
        module_database_url,
        tmp_path / "data",
        config=config,
        name="auth-first",
        ready_headers=TOKEN,
    )
    await asyncio.to_thread(proc.start)
    async with httpx.AsyncClient(base_url=proc.url, timeout=30) as http:
        refused = await http.get("/custom/whoami")
        assert refused.status_code == 401, refused.text
        assert "x-project-middleware" not in refused.headers
        whoami = await http.get("/custom/whoami", headers=TOKEN)
        assert whoami.json() == {"identity": "ada"}
        assert whoami.headers["x-project-middleware"] == "/custom/whoami"
        assert (await http.get("/ok", headers=TOKEN)).json() == {"custom": "ok"}
        # The project's route at a path the API keeps public is the project's: authenticated.
        assert (await http.get("/ok")).status_code == 401
        # disable_webhooks: a run that asks for one is refused, saying why.
        hooked = await http.post(
            "/runs/wait",
            headers=TOKEN,
            json={"assistant_id": "bump", "input": {}, "webhook": "https://example.com/h"},
        )
        assert hooked.status_code == 422 and "webhooks are disabled" in hooked.text
        assert (await http.get("/metrics", headers=TOKEN)).status_code == 404
        # The project's FastAPI document, not the API's.
        paths = (await http.get("/openapi.json", headers=TOKEN)).json()["paths"]
        assert "/custom/hello" in paths and "/threads" not in paths
    # The project's WebSocket routes are authenticated too.
    ws_url = proc.url.replace("http://", "ws://") + "/custom/ws"
    with pytest.raises(websockets.InvalidStatus):
        async with websockets.connect(ws_url):
            pass
    async with websockets.connect(ws_url, additional_headers=TOKEN) as ws:
        assert await ws.recv() == "hi"
    # Its lifespan ends with the server's (SIGTERM: a graceful stop).
    assert await asyncio.to_thread(proc.terminate) == 0
    marks = (tmp_path / "project" / "marks.txt").read_text().splitlines()
    assert marks == ["started", "stopped"]


BAD_HTTP = {
    "flag-not-bool": (
        {"disable_threads": "maybe"},
        '"http.disable_threads": Input should be a valid boolean',
    ),
    "mount-prefix": ({"mount_prefix": "/api"}, "\"http.mount_prefix\" ('/api') is not served"),
    "bad-regex": (
        {"cors": {"allow_origin_regex": "(unclosed"}},
        '"http.cors.allow_origin_regex" is not a regular expression',
    ),
    "no-attribute": ({"app": "./app.py"}, "must look like './path/to/file.py:app'"),
    "js-app": ({"app": "./app.ts:app"}, "is a JavaScript app"),
    "origins-not-a-list": (
        {"cors": {"allow_origins": "*"}},
        '"http.cors.allow_origins": Input should be a valid list',
    ),
    "bad-order": (
        {"middleware_order": "sometimes"},
        "\"http.middleware_order\": Input should be 'auth_first' or 'middleware_first'",
    ),
}


@pytest.mark.parametrize("case", BAD_HTTP)
def test_a_bad_http_value_is_one_clear_error(case: str, tmp_path: Path) -> None:
    http, expected = BAD_HTTP[case]
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "http": http}))
    with pytest.raises(GraphConfigError) as caught:
        read_http(config)
    assert str(caught.value).startswith(f"{config}: "), caught.value
    assert expected in str(caught.value), caught.value


def test_a_missing_app_file_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"graphs": {}, "http": {"app": "./src/app.py:app"}}))
    with pytest.raises(GraphConfigError) as caught:
        load_app(config, read_http(config))
    assert str(caught.value) == (
        f'{config}: "http.app" names {tmp_path / "src" / "app.py"}, which is not a file '
        "(paths are relative to the config file)"
    )


def test_unserved_and_unknown_http_keys_are_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "langgraph.json"
    http = {
        "configurable_headers": {"includes": ["x-*"]},
        "disable_thread": True,
        "disable_store": "true",  # LangGraph's parser takes it, as pydantic's lax mode does
        "disable_webhooks": True,
    }
    config.write_text(json.dumps({"graphs": {}, "http": http}))
    with caplog.at_level("WARNING", logger="api.project.http_config"):
        options = read_http(config)
    assert options.disabled == frozenset({"store"})
    text = "\n".join(caplog.messages)
    assert "has a key LangGraph does not define, ignored: 'disable_thread'" in text, text
    assert "not served by threadline and ignored: configurable_headers" in text, text
    assert "disable_webhooks" not in text, (
        text
    )  # served: webhooks refused (api.contract.webhook_url)
    assert options.disable_webhooks


async def test_a_project_app_that_is_not_an_app_stops_the_start(
    tmp_path: Path, module_database_url: str, make_server: Callable[..., ServerProcess]
) -> None:
    config = write_project(tmp_path / "project", {})
    data = json.loads(config.read_text())
    data["http"]["app"] = "./graph.py:bump"
    config.write_text(json.dumps(data))
    proc = make_server(module_database_url, tmp_path / "data", config=config, name="not-app")
    with pytest.raises(ServerStartError, match="exited with code 1"):
        await asyncio.to_thread(proc.start)
    log = proc.log_path.read_text()
    [line] = [line for line in log.splitlines() if line.startswith("threadline: ")]
    assert "\"http.app\" './graph.py:bump' is a function, not a Starlette" in line, log
    assert "Traceback" not in log
