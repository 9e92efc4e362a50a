"""``extract`` of ``POST /threads/search``: alias → a path into the thread
(``values.messages[-1].content``), answered as each thread's ``extracted``, as LangGraph Server
does (``langgraph_api/utils/extract.py``): at most 10 paths, aliases are identifiers that are not
thread fields, a path starts at ``values``, ``metadata`` or ``interrupts`` (a thread here has no
``config``), and a path that leads nowhere gives ``null``.
"""

from __future__ import annotations

import re
from typing import Any

MAX_PATHS = 10
ROOTS = ("values", "metadata", "interrupts")
THREAD_FIELDS = frozenset(
    {"thread_id", "created_at", "updated_at", "metadata", "status", "values", "interrupts"}
    | {"config", "context", "last_run"}
)
ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
STEP = re.compile(r"\.([^.\[\]]+)|\[(-?\d+)\]")


def check_extract(extract: dict[str, str]) -> list[str]:
    """What is wrong with ``extract`` (empty: nothing)."""
    if len(extract) > MAX_PATHS:
        return [f"at most {MAX_PATHS} paths, not {len(extract)}"]
    wrong = []
    for alias, path in extract.items():
        if alias in THREAD_FIELDS or not ALIAS.match(alias):
            wrong.append(f"alias {alias!r} must be an identifier that is not a thread field")
        elif _steps(path) is None:
            wrong.append(
                f"path {path!r} of {alias!r} must start with {', '.join(ROOTS)} and go on with "
                ".key or [index] steps (values.messages[-1].content)"
            )
    return wrong


def _steps(path: str) -> list[str | int] | None:
    root = path.split(".", 1)[0].split("[", 1)[0]
    if root not in ROOTS or len(path) > 1000:
        return None
    steps: list[str | int] = [root]
    rest, at = path[len(root) :], 0
    for match in STEP.finditer(rest):
        if match.start() != at:
            return None
        key, index = match.groups()
        steps.append(int(index) if index is not None else key)
        at = match.end()
    return steps if at == len(rest) else None


def extracted(thread: dict[str, Any], extract: dict[str, str]) -> dict[str, Any]:
    """Each alias's value in ``thread`` (``null`` where its path leads nowhere)."""
    return {alias: _value(thread, _steps(path) or []) for alias, path in extract.items()}


def _value(thread: dict[str, Any], steps: list[str | int]) -> Any:
    current: Any = thread
    for step in steps:
        if isinstance(step, int) and isinstance(current, list):
            if not -len(current) <= step < len(current):
                return None
            current = current[step]
        elif isinstance(step, str) and isinstance(current, dict):
            current = current.get(step)
        else:
            return None
    return current
