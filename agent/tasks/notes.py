"""``notes``: write two notes in parallel; the step's two ``write_file`` calls ask for approval
in one request, one decision each."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.tasks.base import PlannedCall, PlannedReply, PlanView, Task


class NotesParams(BaseModel):
    first: str = Field("alpha", min_length=1, max_length=200, description="Text of a.txt.")
    second: str = Field("beta", min_length=1, max_length=200, description="Text of b.txt.")


def _plan(p: NotesParams, view: PlanView) -> PlannedReply:
    if view.replies == 0:
        return PlannedReply(
            "Writing both notes at once.",
            [
                PlannedCall("write_file", {"path": "a.txt", "content": p.first + "\n"}),
                PlannedCall("write_file", {"path": "b.txt", "content": p.second + "\n"}),
            ],
        )
    failed = [m for m in view.last_tool_results if m.status == "error"]
    if failed:
        return PlannedReply(f"{len(failed)} note(s) were not written: {failed[0].content}")
    return PlannedReply("Both notes are written.")


CHECK = """
import sys, pathlib
for name, want in (('a.txt', sys.argv[1]), ('b.txt', sys.argv[2])):
    p = pathlib.Path(name)
    if not p.exists():
        sys.exit(f'{name} does not exist')
    got = p.read_text().strip()
    if got != want:
        sys.exit(f'{name} holds {got!r}, expected {want!r}')
print('both notes are right')
"""

NOTES = Task(
    name="notes",
    title="Write two notes in parallel (two calls to approve)",
    params_model=NotesParams,
    instruction=lambda p: (
        f"Write '{p.first}' to a.txt and '{p.second}' to b.txt. The two writes are independent."
    ),
    check=lambda p: ["python", "-c", CHECK, p.first, p.second],
    plan=_plan,
)
