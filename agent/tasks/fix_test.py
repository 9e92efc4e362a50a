"""``fix_test``: a tiny package has a failing unit test; fix the code until the tests pass."""

from __future__ import annotations

from pydantic import BaseModel

from agent.tasks.base import PlannedCall, PlannedReply, PlanView, Task

TESTS = ["python", "-m", "unittest", "-q"]


class NoParams(BaseModel):
    pass


def _plan(_: NoParams, view: PlanView) -> PlannedReply:
    script = [
        PlannedReply("Let me look at the package.", [PlannedCall("list_files", {"path": "."})]),
        PlannedReply(
            "Reading the code and running the tests.",
            [
                PlannedCall("read_file", {"path": "calc.py"}),
                PlannedCall("run_command", {"command": TESTS}),
            ],
        ),
        PlannedReply(
            "add() subtracts; fixing it.",
            [
                PlannedCall(
                    "edit_file", {"path": "calc.py", "old": "return a - b", "new": "return a + b"}
                )
            ],
        ),
        PlannedReply("Running the tests again.", [PlannedCall("run_command", {"command": TESTS})]),
    ]
    if view.replies < len(script) and view.feedback == 0:
        return script[view.replies]
    return PlannedReply("Fixed add() in calc.py; the tests pass.")


FIX_TEST = Task(
    name="fix_test",
    title="Fix a failing unit test",
    params_model=NoParams,
    instruction=lambda _: (
        "The package in this workspace (calc.py) has a failing unit test (test_calc.py). "
        "Find the bug, fix the code (not the test), and run `python -m unittest` until it passes."
    ),
    check=lambda _: TESTS,
    plan=_plan,
    template="fix_test",
    policy={"run_command": "auto"},
)
