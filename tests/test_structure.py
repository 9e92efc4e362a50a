"""The code's structure, read from its source: who imports whom, module sizes, where SQL lives."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = "api/builtin_agent"
MAX_LINES = 300
SERVICE_TABLES = (
    "runs",
    "run_events",
    "threads",
    "approvals",
    "audit_log",
    "api_keys",
    "assistants",
    "assistant_versions",
)
SQL_ON_SERVICE_TABLES = re.compile(
    r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(?:" + "|".join(SERVICE_TABLES) + r")\b", re.IGNORECASE
)


def modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_only_the_adapter_imports_the_agent() -> None:
    """``api/`` serves any graph: only ``api/builtin_agent`` knows the built-in one."""
    leaks = {
        rel(path): sorted(n for n in imported(path) if n == "agent" or n.startswith("agent."))
        for path in modules("api")
        if not rel(path).startswith(ADAPTER + "/")
    }
    assert {k: v for k, v in leaks.items() if v} == {}


def test_the_agent_imports_nothing_of_the_server() -> None:
    leaks = {
        rel(path): sorted(n for n in imported(path) if n.split(".")[0] in ("api", "cli"))
        for path in modules("agent")
    }
    assert {k: v for k, v in leaks.items() if v} == {}


def test_the_import_check_sees_a_leak(tmp_path: Path) -> None:
    """The walk finds imports however they are written (so the checks above can fail)."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "import agent.tools\n"
        "def f():\n"
        "    from agent.approval import parse_decision\n"
        "    return parse_decision\n"
    )
    assert imported(leaky) == {"agent.tools", "agent.approval"}


@pytest.mark.parametrize("package", ["api", "agent", "cli"])
def test_no_module_is_over_the_size_limit(package: str) -> None:
    sizes = {
        rel(p): n
        for p in modules(package)
        if "templates" not in p.parts and (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert sizes == {}, f"split these modules (over {MAX_LINES} lines): {sizes}"


def test_sql_on_the_service_tables_is_only_in_the_store() -> None:
    """``api/store`` owns the service's tables (LangGraph's checkpoint tables aside)."""
    found = {
        rel(path): SQL_ON_SERVICE_TABLES.findall(path.read_text())
        for path in modules("api", "cli")
        if not rel(path).startswith("api/store/")
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_the_sql_check_sees_a_statement() -> None:
    text = 'cur = await conn.execute("SELECT status FROM runs WHERE run_id = %s")'
    assert SQL_ON_SERVICE_TABLES.findall(text) == ["FROM runs"]
    assert not SQL_ON_SERVICE_TABLES.findall("runs from the queue, threads into the store")
