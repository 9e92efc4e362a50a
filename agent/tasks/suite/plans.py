"""Building blocks of the suite's offline plans and checks.

A plan is a list of *phases*: phase ``i`` is played after ``i`` failed acceptance checks, one
reply per agent step, and ends with a reply without tool calls. A reply may be computed from the
previous step's tool results (a callable over the :class:`PlanView`), as a model reads what its
tools returned. A failed tool call (a rejected approval, an edit whose text was not found) ends
the plan with a reply that says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from agent.tasks.base import TEMPLATES, PlannedCall, PlannedReply, PlanView

Step = PlannedReply | Callable[[PlanView], PlannedReply]
Phase = Sequence[Step]

NO_OTHER_PLAN = "The acceptance check still fails and I have no other plan; stopping here."


EDITS_AUTO = {"write_file": "auto", "edit_file": "auto"}
"""The edit tasks' policy: their writes are pre-approved (they measure editing, not approvals)."""


def play(view: PlanView, phases: Sequence[Phase]) -> PlannedReply:
    """The reply for the current step of a phased plan (see module docstring)."""
    failed = [m for m in view.last_tool_results if m.status == "error"]
    if failed:
        return PlannedReply(f"A tool call failed, so I stop here: {failed[0].content}")
    if view.feedback >= len(phases):
        return PlannedReply(NO_OTHER_PLAN)
    index = view.replies - sum(len(p) for p in phases[: view.feedback])
    phase = phases[view.feedback]
    if index < 0:  # an earlier phase ended early (a failed call): nothing fits any more
        return PlannedReply(NO_OTHER_PLAN)
    step = phase[min(index, len(phase) - 1)]
    return step(view) if callable(step) else step


def result_text(view: PlanView, index: int = 0) -> str:
    """The text the ``index``-th tool call of the previous step returned."""
    return str(view.last_tool_results[index].content)


def call(name: str, **args: object) -> PlannedCall:
    return PlannedCall(name, dict(args))


def reply(content: str, *calls: PlannedCall) -> PlannedReply:
    return PlannedReply(content, calls)


def template_text(task: str, path: str) -> str:
    """A file of a task's workspace template, as shipped."""
    return (TEMPLATES / task / path).read_text(encoding="utf-8")


def template_digest(task: str, path: str) -> str:
    return hashlib.sha256((TEMPLATES / task / path).read_bytes()).hexdigest()


def python_check(script: str, *args: str) -> list[str]:
    """An acceptance check: ``python -c script args...`` run in the workspace."""
    return ["python", "-c", script, *args]


UNITTEST_CHECK = """
import hashlib, sys, unittest
for name, digest in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        got = hashlib.sha256(open(name, 'rb').read()).hexdigest()
    except FileNotFoundError:
        sys.exit(f'{name} is missing: restore it, the tests are part of the task')
    if got != digest:
        sys.exit(f'{name} was changed: fix the code, not the tests')
suite = unittest.defaultTestLoader.discover('.', pattern='test_*.py')
result = unittest.TextTestRunner(verbosity=1).run(suite)
if result.testsRun == 0:
    sys.exit('no tests ran')
sys.exit(0 if result.wasSuccessful() else 1)
"""


def unittest_check(task: str, test_files: Sequence[str]) -> list[str]:
    """Run the workspace's unit tests, after checking the template's test files are unchanged."""
    pairs = [x for f in test_files for x in (f, template_digest(task, f))]
    return python_check(UNITTEST_CHECK, *pairs)


TESTS = ["python", "-m", "unittest", "-q"]
"""The command the fix plans run to see the tests' state."""
