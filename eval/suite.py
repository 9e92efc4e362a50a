"""Suites as data: ``eval/suites/<name>.json`` lists catalog tasks (or ``"all"``) and params.

A suite file::

    {"name": "small", "description": "...",
     "tasks": [{"task": "counter", "params": {"n": 3}}, {"task": "fix_window"}],
     "params": {"counter": {"n": 5}}}

``tasks`` may be ``"all"`` (every catalog task, in catalog order); ``params`` gives per-task
parameters for tasks listed without their own. Parameters are validated against the task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.tasks import CATALOG, get_task

SUITES_DIR = Path(__file__).parent / "suites"


@dataclass(frozen=True)
class Case:
    """One task of a suite with its parameters."""

    task: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    def input(self) -> dict[str, Any]:
        return {"task": {"name": self.task, "params": self.params}}


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    cases: tuple[Case, ...]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "tasks": [{"task": c.task, "kind": c.kind, "params": c.params} for c in self.cases],
        }


def available() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.json"))


def load_suite(name_or_path: str) -> Suite:
    """A suite by name (``small``, ``full``) or by the path of a JSON file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SUITES_DIR / f"{name_or_path}.json"
    if not path.is_file():
        raise ValueError(
            f"no suite {name_or_path!r}: give a file or one of {', '.join(available())}"
        )
    raw = json.loads(path.read_text())
    defaults: dict[str, Any] = raw.get("params") or {}
    listed = raw.get("tasks")
    if listed == "all":
        entries = [{"task": name} for name in CATALOG]
    elif isinstance(listed, list) and listed:
        entries = listed
    else:
        raise ValueError(f"{path}: 'tasks' must be \"all\" or a non-empty list")
    cases = []
    for entry in entries:
        name = entry["task"]
        try:
            task = get_task(name)
        except KeyError as err:
            raise ValueError(f"{path}: {err.args[0]}") from None
        params = entry.get("params", defaults.get(name, {}))
        task.parse_params(params)  # ValueError names what is wrong
        cases.append(Case(task=name, kind=task.kind, params=dict(params)))
    return Suite(
        name=raw.get("name", path.stem), description=raw.get("description", ""), cases=tuple(cases)
    )
