"""The tasks the built-in agent can be given: the shipped demos and the operator's own.

A task's instruction, workspace template, acceptance check and approval rules come from here
only, never from a client: a run's input names a task and its declared parameters, and the
agent looks the rest up (``TaskCatalog``) every time it needs a program or a rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.tasks.base import Task
from agent.tasks.counter import COUNTER
from agent.tasks.fix_test import FIX_TEST
from agent.tasks.greet import GREET
from agent.tasks.notes import NOTES
from agent.tasks.suite import SUITE_TASKS

CATALOG: dict[str, Task] = {t.name: t for t in (COUNTER, FIX_TEST, GREET, NOTES, *SUITE_TASKS)}
"""The four demos first, then the evaluation suite's tasks (``agent.tasks.suite``)."""

FREEFORM = "freeform"
"""The task name of a free-text request (no catalog entry)."""
CHAT_TASK = re.compile(r"\A\s*/task\s+(?P<name>[a-z][a-z0-9_]*)\s*(?P<params>\{.*\})?\s*\Z", re.S)
"""A chat message that starts a catalog task, as ``{"task": ...}`` input does: ``/task NAME``
or ``/task NAME {"param": value}`` (for chat front ends, which send only messages)."""


def chat_task(text: str) -> tuple[str, dict[str, Any]] | None:
    """The task and parameters a ``/task`` chat message names; ValueError when its parameters
    are not a JSON object; None for any other message."""
    found = CHAT_TASK.match(text)
    if found is None:
        return None
    params = json.loads(found["params"]) if found["params"] else {}
    if not isinstance(params, dict):
        raise ValueError("the parameters of /task are a JSON object")
    return found["name"], params


def get_task(name: str) -> Task:
    """A shipped task by name; KeyError's message lists the known tasks."""
    return TaskCatalog().get(name)


@dataclass(frozen=True)
class TaskCatalog:
    """The shipped tasks plus the operator's (``agent.tasks.operator``), and the acceptance
    check of free-text runs (``None`` unless the operator configured one)."""

    extra: Mapping[str, Task] = field(default_factory=dict)
    freeform_check: tuple[str, ...] | None = None

    @property
    def tasks(self) -> dict[str, Task]:
        return {**CATALOG, **self.extra}

    def get(self, name: str) -> Task:
        """A task by name; KeyError's message lists the known tasks."""
        found = self.extra.get(name) or CATALOG.get(name)
        if found is None:
            raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(sorted(self.tasks))}")
        return found

    def check_for(self, spec: Mapping[str, Any] | None) -> list[str] | None:
        """The acceptance check of a task in the state, from the catalog (never from the state)."""
        name = (spec or {}).get("name")
        if not name or name == FREEFORM:
            return list(self.freeform_check) if self.freeform_check else None
        task = self.extra.get(str(name)) or CATALOG.get(str(name))
        if task is None:
            return None
        try:
            params = task.parse_params((spec or {}).get("params"))
        except ValueError:
            return None
        return task.check(params)

    def policy_for(self, spec: Mapping[str, Any] | None) -> dict[str, str]:
        """The approval rules of a task in the state, from the catalog (never from the state)."""
        name = str((spec or {}).get("name") or FREEFORM)
        task = self.extra.get(name) or CATALOG.get(name)
        return dict(task.policy) if task else {}

    def describe(self) -> list[dict[str, Any]]:
        return [task.describe() for task in self.tasks.values()]

    @classmethod
    def with_tasks(
        cls, tasks: Iterable[Task], freeform_check: Iterable[str] | None = None
    ) -> TaskCatalog:
        extra = {t.name: t for t in tasks}
        clash = sorted(set(extra) & (set(CATALOG) | {FREEFORM}))
        if clash:
            raise ValueError(
                f"operator task name(s) {clash} are taken by the shipped tasks; rename them"
            )
        return cls(extra=extra, freeform_check=tuple(freeform_check) if freeform_check else None)
