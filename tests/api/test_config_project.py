"""A LangGraph project served unchanged from its own ``langgraph.json``: its ``"dependencies"``
make its package importable by its own name, its ``"env"`` (``.env``) is loaded before its graph
is imported (no ``PYTHONPATH``, the key only in ``.env``), as LangGraph's CLI does
(``api.project.environment``); and a project that cannot start says why in one line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.project.environment import add_dependencies, load_env, warn_of_unserved_keys
from api.project.graphs import GraphConfigError
from tests.api.conftest import FAST
from tests.utils.server import ServerProcess, ServerStartError, serving

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "self_import"
FROM_DOTENV = ("MY_GREETING", "GREETER_SIGNATURE")
"""Variables only the project's ``.env`` sets: the test's server must not have them already."""


@pytest.fixture(scope="module")
def project_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("project")
    # The .env's value of this one wins over the process's, as with `langgraph dev`.
    env = {"GREETER_PUNCTUATION": "?"}
    proc = ServerProcess(
        module_database_url, data, config=PROJECT / "langgraph.json", env=env, name="proj", **FAST
    )
    for name in FROM_DOTENV:
        proc.env.pop(name, None)
    with serving(proc):
        yield proc


async def test_a_self_importing_project_runs_with_its_env(project_server: ServerProcess) -> None:
    from langgraph_sdk import get_client

    async with get_client(url=project_server.url) as client:
        assert {a["graph_id"] for a in await client.assistants.search()} >= {"greeter"}
        thread = await client.threads.create()
        values: Any = await client.runs.wait(thread["thread_id"], "greeter", input={"name": "Ada"})
    assert values == {
        "name": "Ada",
        "greeting": "Hello from .env, Ada!",  # read from the environment when the node ran
        "signature": "signed Hello from .env",  # read when the module was imported; ${} expanded
    }
    assert "Traceback" not in project_server.log_path.read_text(errors="replace")


def write_project(root: Path, config: dict[str, Any]) -> Path:
    """A copy of the test project's config, pointing at its code, with ``config`` over it."""
    root.mkdir(parents=True, exist_ok=True)
    base = json.loads((PROJECT / "langgraph.json").read_text())
    base["graphs"] = {"greeter": str(PROJECT / "src" / "greeter_agent" / "graph.py") + ":graph"}
    base["dependencies"] = [str(PROJECT)]
    base["env"] = str(PROJECT / ".env")
    path = root / "langgraph.json"
    path.write_text(json.dumps({**base, **config}))
    return path


CANNOT_START = {
    "missing-path": (
        {"dependencies": ["./nope"]},
        "dependency './nope' is {root}/nope, which does not exist",
    ),
    "missing-env-file": (
        {"env": ".env.missing"},
        '"env" names {root}/.env.missing, which is not a file',
    ),
    "package-not-installed": (
        {"dependencies": [".", "threadline-no-such-package>=1"]},
        "dependency 'threadline-no-such-package>=1' not installed in threadline's environment; "
        f"install it ({sys.executable} -m pip install 'threadline-no-such-package>=1')",
    ),
    # Its package is not importable without its project in "dependencies".
    "not-in-dependencies": (
        {"dependencies": []},
        f"ModuleNotFoundError: No module named 'greeter_agent' (at {PROJECT}/src/greeter_agent/"
        "graph.py:10); list the directory that holds 'greeter_agent' in the config's "
        '"dependencies"',
    ),
}


async def test_a_project_that_cannot_start_says_why_in_one_line(
    tmp_path: Path, module_database_url: str, make_server: Callable[..., ServerProcess]
) -> None:
    """Each case's server exits with status 1 and one ``threadline: ...`` line, no traceback.
    (The servers start at once: each spends its ~2 s importing before it fails.)"""

    def failed_start(case: str) -> str:
        proc = make_server(
            module_database_url,
            tmp_path / case / "data",
            config=write_project(tmp_path / case, CANNOT_START[case][0]),
            name=case,
        )
        with pytest.raises(ServerStartError, match="exited with code 1"):
            proc.start()
        return proc.log_path.read_text()

    logs = await asyncio.gather(*(asyncio.to_thread(failed_start, case) for case in CANNOT_START))
    for (case, (_, expected)), log in zip(CANNOT_START.items(), logs, strict=True):
        assert "Traceback" not in log, (case, log)
        [line] = [line for line in log.splitlines() if line.startswith("threadline: ")]
        assert expected.format(root=tmp_path / case) in line, (case, log)


# -- the semantics, in this process -----------------------------------------------------------


def test_env_file_values_win_and_a_bare_key_unsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("TL_TEST_A=file\nTL_TEST_B\nTL_TEST_C='quoted # kept'\n")
    for name in ("TL_TEST_A", "TL_TEST_B", "TL_TEST_C"):
        monkeypatch.setenv(name, "process")  # restored (or removed) after the test
    load_env(tmp_path / "langgraph.json", tmp_path, ".env")
    assert os.environ["TL_TEST_A"] == "file"
    assert "TL_TEST_B" not in os.environ
    assert os.environ["TL_TEST_C"] == "quoted # kept"


def test_env_mapping_values_are_literal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TL_TEST_D", "process")
    monkeypatch.setenv("TL_TEST_E", "process")
    load_env(tmp_path / "langgraph.json", tmp_path, {"TL_TEST_D": "${HOME}", "TL_TEST_E": 3})
    assert (os.environ["TL_TEST_D"], os.environ["TL_TEST_E"]) == ("${HOME}", "3")
    with pytest.raises(GraphConfigError, match="'TL_TEST_D' must be a string"):
        load_env(tmp_path / "langgraph.json", tmp_path, {"TL_TEST_D": {"nested": 1}})


def test_local_dependencies_are_importable_as_a_build_would_install_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    packaged = tmp_path / "packaged"
    (packaged / "src").mkdir(parents=True)
    (packaged / "pyproject.toml").write_text("[project]\nname = 'packaged'\n")
    flat = tmp_path / "libs" / "flat_pkg"
    flat.mkdir(parents=True)
    (flat / "__init__.py").write_text("")
    plain = tmp_path / "plain"
    plain.mkdir()
    config = tmp_path / "langgraph.json"
    add_dependencies(config, tmp_path, ["./packaged", "./libs/flat_pkg", "./plain", "langgraph"])
    added = sys.path[-6:]
    assert added == [
        str(tmp_path),  # the config's directory, as `langgraph dev` adds its own
        str(packaged),
        str(packaged / "src"),  # src layout: what `pip install ./packaged` makes importable
        str(flat),
        str(tmp_path / "libs"),  # a flat package: importable by its directory's name
        str(plain),
    ]
    (plain / "x.py").write_text("")
    with pytest.raises(GraphConfigError, match=r"dependency './plain/x\.py' .* not a directory"):
        add_dependencies(config, tmp_path, ["./plain/x.py"])
    with pytest.raises(GraphConfigError, match="must be a list of strings"):
        add_dependencies(config, tmp_path, "langgraph")


def test_a_project_package_named_like_a_loaded_one_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """threadline's own ``api`` is imported first: the project's ``api`` is not what its code
    would get."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "__init__.py").write_text("")
    (tmp_path / "my_graphs").mkdir()
    (tmp_path / "my_graphs" / "__init__.py").write_text("")
    with caplog.at_level("WARNING", logger="api.project.environment"):
        add_dependencies(tmp_path / "langgraph.json", tmp_path, ["."])
    [warning] = caplog.messages
    assert f"the project's {tmp_path / 'api'} has the name of a module already loaded" in warning


def test_keys_this_server_does_not_serve_are_named_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not silently dropped: ``ui`` or ``encryption`` settings are named in a start-up warning;
    the image build's keys (``python_version``, ...) and the served ones are not."""
    config = tmp_path / "langgraph.json"
    data = {
        "graphs": {"g": "./g.py:graph"},
        "python_version": "3.11",
        "dockerfile_lines": [],
        "ui": {"g": "./ui.tsx"},
        "encryption": {"path": "./encryption.py:encryption"},
        "http": {"app": "./app.py:app"},
        "checkpointer": {"ttl": {"default_ttl": 60}},
    }
    with caplog.at_level("WARNING", logger="api.project.environment"):
        warn_of_unserved_keys(config, data)
    [warning] = caplog.messages
    assert "'encryption', 'ui' not served by threadline yet" in warning, warning
    assert "python_version" not in warning and "dockerfile_lines" not in warning
    caplog.clear()
    with caplog.at_level("WARNING", logger="api.project.environment"):
        warn_of_unserved_keys(config, {"graphs": {}, "env": ".env", "dependencies": ["."]})
    assert caplog.messages == []
