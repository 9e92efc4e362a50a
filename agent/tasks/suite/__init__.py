"""The evaluation suite's catalog tasks, one module per kind: ``edits``, ``fixes``, ``approvals``.

Each task has a workspace template under ``agent/tasks/templates/<name>/``, an acceptance check
that fails on the untouched template, and an offline plan that solves it (``plans.play``).
"""

from agent.tasks.suite.approvals import APPROVAL_TASKS
from agent.tasks.suite.edits import EDIT_TASKS
from agent.tasks.suite.fixes import FIX_TASKS

SUITE_TASKS = (*EDIT_TASKS, *FIX_TASKS, *APPROVAL_TASKS)

__all__ = ["APPROVAL_TASKS", "EDIT_TASKS", "FIX_TASKS", "SUITE_TASKS"]
