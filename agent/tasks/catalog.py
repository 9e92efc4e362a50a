"""The demo tasks that ship with threadline."""

from __future__ import annotations

from agent.tasks.base import Task
from agent.tasks.counter import COUNTER
from agent.tasks.fix_test import FIX_TEST
from agent.tasks.greet import GREET
from agent.tasks.notes import NOTES
from agent.tasks.suite import SUITE_TASKS

CATALOG: dict[str, Task] = {t.name: t for t in (COUNTER, FIX_TEST, GREET, NOTES, *SUITE_TASKS)}
"""The four demos first, then the evaluation suite's tasks (``agent.tasks.suite``)."""


def get_task(name: str) -> Task:
    """A catalog task by name; KeyError's message lists the known tasks."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(
            f"unknown task {name!r}; known tasks: {', '.join(sorted(CATALOG))}"
        ) from None
