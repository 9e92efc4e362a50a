"""The ``review`` node: one approval request for every call of a step that asks.

The router sends a step's calls here together when any of them asks (their rules decided when
the model made them); the node interrupts once, with one action request per asking call, then
sends every call of the step to the ``tools`` node, the asked ones with their decisions in the
payload, which the checkpoint keeps: every later attempt runs a call as it was answered. Nothing
of the step runs before the answer, and on resume the node re-runs from its first line,
side-effect free.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from langgraph.types import Command, Send, interrupt

from agent.approval import AskedCall, approval_request, parse_decisions
from agent.state import ReviewTask, ToolTask
from agent.tools import ToolSpec


def asks(task: ToolTask, tools: dict[str, ToolSpec]) -> bool:
    """A call the review asks about: a known tool whose rule is ``ask`` (a refused or unknown
    call is answered by the ``tools`` node)."""
    return (
        task["tool_call"]["name"] in tools
        and task["ruling"].get("rule") == "ask"
        and not task.get("refusal")
    )


@dataclass
class ReviewNode:
    tools: list[ToolSpec]

    def __post_init__(self) -> None:
        self.by_name = {t.name: t for t in self.tools}

    async def __call__(self, task: ReviewTask) -> Command[str]:
        calls = task["calls"]
        asking = [c for c in calls if asks(c, self.by_name)]
        asked = [
            AskedCall(
                tool=self.by_name[c["tool_call"]["name"]],
                call_id=str(c["tool_call"]["id"]),
                args=c["tool_call"]["args"],
                ruling=c["ruling"],
            )
            for c in asking
        ]
        answer = interrupt(approval_request(asked))
        by_call: dict[str, ToolTask] = {}
        try:
            tools = [a.tool for a in asked]
            decisions = parse_decisions(answer, list(tools), [t.name for t in tools])
        except ValueError as err:  # an answer that bypassed the server's checks: nothing runs
            by_call = {str(c["tool_call"]["id"]): {**c, "answer_error": str(err)} for c in asking}
        else:
            by_call = {
                a.call_id: {**c, "decision": asdict(d)}
                for a, c, d in zip(asked, asking, decisions, strict=True)
            }
        sends = [by_call.get(str(c["tool_call"]["id"]), c) for c in calls]
        return Command(goto=[Send("tools", c) for c in sends])
