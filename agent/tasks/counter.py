"""``counter``: append 1..n to ``counter.txt``, one slow tool call per line, some in parallel.

It exists to make crashes and duplicates visible: after any number of kills and resumes the file
must hold each line exactly once. Each append goes through ``append.py`` in the workspace, which
takes ``delay`` seconds and records the call's idempotency key before its line, so a call that a
killed server interrupted (its sandboxed process dies with the server) is applied once when
LangGraph runs the unfinished task again.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.tasks.base import PlannedCall, PlannedReply, PlanView, Task


class CounterParams(BaseModel):
    n: int = Field(5, ge=1, le=500, description="How many lines to append.")
    delay: float = Field(0.5, ge=0, le=60, description="Seconds each append takes.")


def groups(n: int) -> list[list[int]]:
    """Lines per step: 1 | 2 3 | 4 | 5 6 | ... (every second step has two parallel calls)."""
    out: list[list[int]] = []
    i = 1
    while i <= n:
        size = 1 if len(out) % 2 == 0 else 2
        out.append(list(range(i, min(i + size, n + 1))))
        i += size
    return out


def _plan(p: CounterParams, view: PlanView) -> PlannedReply:
    steps = groups(p.n)
    if view.replies < len(steps) and view.feedback == 0:
        lines = steps[view.replies]
        return PlannedReply(
            content=f"Appending line{'s' if len(lines) > 1 else ''} "
            + ", ".join(map(str, lines))
            + ".",
            calls=[
                PlannedCall(
                    "run_command", {"command": ["python", "append.py", str(i), str(p.delay)]}
                )
                for i in lines
            ],
        )
    return PlannedReply(content=f"counter.txt now holds the lines 1 to {p.n}.")


CHECK = """
import sys
n = int(sys.argv[1])
try:
    lines = open('counter.txt').read().split()
except FileNotFoundError:
    sys.exit('counter.txt does not exist')
want = [str(i) for i in range(1, n + 1)]
dups = sorted({x for x in lines if lines.count(x) > 1}, key=int)
missing = [x for x in want if x not in lines]
extra = sorted(set(lines) - set(want))
if dups or missing or extra:
    sys.exit(f'duplicated: {dups} missing: {missing} unexpected: {extra}')
print(f'counter.txt holds 1..{n}, each once')
"""

COUNTER = Task(
    name="counter",
    title="Count to n, one slow tool call per line",
    params_model=CounterParams,
    instruction=lambda p: (
        f"Append the numbers 1 to {p.n} to counter.txt, one per line, each exactly once. "
        f"Append each line with the command `python append.py <i> {p.delay}` "
        "(it takes a while; lines may be appended in parallel)."
    ),
    check=lambda p: ["python", "-c", CHECK, str(p.n)],
    plan=_plan,
    template="counter",
    # The task's only command is its own append script: it need not ask.
    policy={"run_command": "auto"},
)
