"""``greet``: write a greeting file; its ``write_file`` asks for approval by default."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.tasks.base import PlannedCall, PlannedReply, PlanView, Task


class GreetParams(BaseModel):
    name: str = Field("world", min_length=1, max_length=100, description="Who to greet.")


def _plan(p: GreetParams, view: PlanView) -> PlannedReply:
    if view.replies == 0:
        return PlannedReply(
            "Writing the greeting.",
            [PlannedCall("write_file", {"path": "greeting.txt", "content": f"Hello, {p.name}!\n"})],
        )
    if view.feedback:
        return PlannedReply("greeting.txt is not as the check wants; I have no other plan.")
    results = view.last_tool_results
    if results and results[-1].status == "error":
        return PlannedReply(f"I could not write greeting.txt: {results[-1].content}")
    return PlannedReply("greeting.txt is written.")


CHECK = """
import sys
want = 'Hello, ' + sys.argv[1] + '!'
try:
    got = open('greeting.txt').read().strip()
except FileNotFoundError:
    sys.exit('greeting.txt does not exist')
if got != want:
    sys.exit(f'greeting.txt holds {got!r}, expected {want!r}')
print('greeting.txt is right')
"""

GREET = Task(
    name="greet",
    title="Write a greeting (asks for approval)",
    params_model=GreetParams,
    instruction=lambda p: f"Write the line 'Hello, {p.name}!' to greeting.txt.",
    check=lambda p: ["python", "-c", CHECK, p.name],
    plan=_plan,
)
