"""Inputs that start the built-in agent's demo tasks (``agent/tasks``): ``{"task": {...}}``.

Pass one as a run's ``input`` (HTTP, the SDK or ``RunCreate``). The defaults are the tests'
conventions, not the catalog's: ``greet()`` greets Ada, ``counter(n)`` appends without delay.
"""

from __future__ import annotations

from typing import Any


def task(name: str, /, **params: Any) -> dict[str, Any]:
    """The input of the catalog task ``name`` with ``params``."""
    return {"task": {"name": name, "params": params}}


def counter(n: int, delay: float = 0.0) -> dict[str, Any]:
    """Append 1..n to ``counter.txt``, each append taking ``delay`` seconds (no approval)."""
    return task("counter", n=n, delay=delay)


def greet(name: str = "Ada") -> dict[str, Any]:
    """Write ``greeting.txt`` (``Hello, <name>!``); by default ``write_file`` asks for approval."""
    return task("greet", name=name)


def notes(first: str = "alpha", second: str = "beta") -> dict[str, Any]:
    """Write ``a.txt`` and ``b.txt`` in parallel: by default one approval request asking about
    both calls (one interrupt, two action requests, answered with two decisions)."""
    return task("notes", first=first, second=second)
