"""``api/``'s layers, read from its source: each folder imports only itself and the folders below
it, no module import goes round in a circle, and no import hides inside a function or under
``if TYPE_CHECKING`` (where it would dodge both checks). ``docs/architecture.md`` draws them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "api"
LAYERS = (
    "platform",  # settings, database, embedded server, logs, metrics, errors, JSON
    "store",  # every SQL statement, LangGraph's checkpoint tables' included
    "contract",  # the API's bodies (pydantic) and what they check
    "project",  # what a langgraph.json brings: graphs, factories, adapters, http, store config
    "auth",  # who the caller is and what they may see
    "durable",  # the checkpointer and the event log's write path, the hub, long-term memory
    "engine",  # runtime, workers, attempts, leases, takeover, webhooks' delivery
    "runs",  # creating, checking, resuming, cancelling runs; threads, assistants, crons
    "http",  # routes, SSE, the request's checks, error answers, the project's app
    "builtin_agent",  # the built-in agent, served through the seam (api.project.adapters)
    "",  # the composition root: api/app.py, api/lifecycle.py, api/server.py
)
ROOT_MODULES = {"__init__", "app", "lifecycle", "server"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(API.rglob("*.py"))}


def layer(module: str) -> str:
    """The folder a module of ``api`` lives in ("" for the composition root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else ""


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """Each ``api`` module a file imports, and whether the import is hidden (in a function or
    under ``if TYPE_CHECKING``)."""

    def walk(node: ast.AST, hidden: bool) -> Iterator[tuple[str, bool]]:
        for child in ast.iter_child_nodes(node):
            inner = hidden or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                inner = True
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                names = [f"{child.module}.{a.name}" for a in child.names] + [child.module]
            for name in names:
                while name and name not in MODULES:
                    name = name.rpartition(".")[0]
                if name and name != "api":
                    yield name, inner
            yield from walk(child, inner)

    yield from walk(ast.parse(path.read_text(), str(path)), False)


GRAPH = {m: {n for n, _ in imports(p) if n != m} for m, p in MODULES.items()}


def test_every_module_lives_in_a_layer() -> None:
    strays = sorted(
        m for m in MODULES if layer(m) == "" and m != "api" and m.split(".")[1] not in ROOT_MODULES
    )
    assert strays == [], f"put these in one of the layers {LAYERS[:-1]}: {strays}"
    assert {p.name for p in API.iterdir() if p.is_dir() and any(p.glob("*.py"))} <= set(LAYERS)


def test_each_layer_imports_only_itself_and_the_layers_below() -> None:
    upward = sorted(
        f"{m} -> {n}"
        for m, names in GRAPH.items()
        for n in names
        if LAYERS.index(layer(n)) > LAYERS.index(layer(m))
    )
    assert upward == []


def test_no_import_hides_in_a_function_or_under_type_checking() -> None:
    hidden = sorted(f"{m} -> {n}" for m, p in MODULES.items() for n, h in imports(p) if h)
    assert hidden == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert circles(GRAPH) == []


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    """The walk finds hidden imports and the circle finder finds circles (so the checks can
    fail)."""
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "from typing import TYPE_CHECKING\n"
        "from api.platform import errors\n"
        "if TYPE_CHECKING:\n"
        "    from api.runs.core import Core\n"
        "def f():\n"
        "    from api.engine.worker import Workers\n"
    )
    assert set(imports(sneaky)) == {
        ("api.platform.errors", False),
        ("api.platform", False),
        ("api.runs.core", True),
        ("api.engine.worker", True),
    }
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("api.engine.worker") == "engine"
    assert layer("api.http.routes.runs") == "http"
    assert layer("api.app") == ""


@pytest.mark.parametrize("folder", [name for name in LAYERS if name])
def test_each_layer_says_what_it_holds(folder: str) -> None:
    """A newcomer opening a folder reads first what it is for, and what it may import."""
    init = API / folder / "__init__.py"
    assert ast.get_docstring(ast.parse(init.read_text())), f"{init} needs a docstring"
