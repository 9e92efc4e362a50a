"""The ``tools`` node: runs exactly one tool call (one ``Send`` task per call).

A call that finished before a crash is never run again: its ``ToolMessage`` is already a saved
pending write of the interrupted step, and LangGraph re-runs only the unfinished tasks. An ``ask``
call comes with its answer from the ``review`` node, which asked before anything ran. Read-only
calls of a step run together up to ``Limits.tool_concurrency``; calls that write run one at a
time in the model's order (``agent.concurrency``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from agent.approval import ApprovalDecision, AskedCall, approval_request, parse_decisions
from agent.concurrency import ToolTurns
from agent.events import ToolExecution, ToolFinishedEvent, ToolStartedEvent, event_writer
from agent.hooks import PRIOR_RESULT_KEY, RECORD_TOOL_KEY
from agent.limits import Limits
from agent.nodes.agent_step import thread_id_of
from agent.policy import ApprovalPolicy, validate_rules
from agent.state import ToolTask
from agent.tools import ToolContext, ToolSpec, ensure_workspace, execute_tool


def _message(call: dict[str, Any], content: str, ok: bool, duration: float = 0.0) -> dict[str, Any]:
    return {
        "messages": [
            ToolMessage(
                content=content,
                tool_call_id=call["id"],
                name=call["name"],
                status="success" if ok else "error",
                additional_kwargs={"duration": round(duration, 4)},
            )
        ]
    }


@dataclass
class ToolCallNode:
    """Callable node over the tool registry and the approval policy."""

    tools: list[ToolSpec]
    policy: ApprovalPolicy
    data_dir: Path
    limits: Limits

    def __post_init__(self) -> None:
        self.by_name = {t.name: t for t in self.tools}
        self.turns = ToolTurns(self.limits.tool_concurrency)

    def _ruling(self, task: ToolTask, tool: ToolSpec) -> dict[str, str]:
        """The rule decided when the call was made (in its payload). A payload from before rules
        travelled with calls has only the task's rules: the server's rule then, never the
        resuming run's."""
        if "ruling" in task:
            return dict(task["ruling"])
        try:
            task_rules = validate_rules(task.get("task_policy") or {})
        except ValueError:
            task_rules = {}
        rule, source = self.policy.server_ruling(
            tool.name, read_only=tool.read_only, task_rules=task_rules
        )
        return {"rule": rule, "source": source, "server_rule": rule}

    def _decision(
        self, task: ToolTask, tool: ToolSpec, call: dict[str, Any]
    ) -> ApprovalDecision | str:
        """An ``ask`` call's answer: the review node's (in the payload), else (a payload from
        before calls were reviewed by step) asked here, first thing in the task: on resume the
        node re-runs from here, side-effect free. A string: why it does not run."""
        if "answer_error" in task:
            return f"The approval answer was invalid ({task['answer_error']}); not run."
        if "decision" in task:
            return ApprovalDecision(**task["decision"])
        asked = AskedCall(tool=tool, call_id=call["id"], args=call["args"], ruling=task["ruling"])
        answer = interrupt(approval_request([asked]))
        try:
            return parse_decisions(answer, [tool], [tool.name])[0]
        except ValueError as err:
            return f"The approval answer was invalid ({err}); not run."

    async def __call__(self, task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        async with self.turns.call(task, config):
            return await self._run(task, config)

    async def _run(self, task: ToolTask, config: RunnableConfig) -> dict[str, Any]:
        call: dict[str, Any] = dict(task["tool_call"])
        tool = self.by_name.get(call["name"])
        if tool is None:
            return _message(
                call,
                f"There is no tool named {call['name']!r}. Available tools: "
                f"{', '.join(self.by_name)}.",
                ok=False,
            )
        if task.get("refusal"):
            return _message(call, str(task["refusal"]), ok=False)
        ruling = self._ruling(task, tool)
        rule = ruling["rule"]
        args = call["args"]
        if rule not in ("auto", "ask"):  # deny, and anything unreadable fails closed
            return _message(
                call,
                f"{tool.name} is denied by the approval policy and was not run. "
                "Do not call it again; use another tool or finish with what you have.",
                ok=False,
            )
        if rule == "ask":
            decision = self._decision(task, tool, call)
            if isinstance(decision, str):
                return _message(call, decision, ok=False)
            if decision.decision == "reject":
                note = decision.message or "no reason given"
                return _message(
                    call,
                    f"A human rejected this call ({note}). It was not run; adapt your plan.",
                    ok=False,
                )
            if decision.decision == "edit" and decision.args is not None:
                args = decision.args
        async with self.turns.turn(task, config):  # reads up to the cap, writes in order
            return await self._execute(task, config, tool, call, args)

    async def _execute(
        self,
        task: ToolTask,
        config: RunnableConfig,
        tool: ToolSpec,
        call: dict[str, Any],
        args: dict[str, Any],
    ) -> dict[str, Any]:
        configurable = config.get("configurable") or {}
        write = event_writer()
        key = f"{thread_id_of(config)}:{call['id']}"
        lookup = configurable.get(PRIOR_RESULT_KEY)
        prior = await lookup(key) if lookup is not None else None
        if prior is not None:
            replayed: ToolFinishedEvent = {
                "type": "tool_finished",
                "tool_call_id": call["id"],
                "tool": tool.name,
                "ok": prior["ok"],
                "duration": 0.0,
                "output": prior["content"][:2000],
                "replayed": True,
            }
            write(replayed)
            # The same message as the execution's own, so a client that already saw it can be
            # spared the copy (the service drops an update it stored in an earlier attempt).
            return _message(call, prior["content"], prior["ok"], prior.get("duration", 0.0))
        started_event: ToolStartedEvent = {
            "type": "tool_started",
            "tool_call_id": call["id"],
            "tool": tool.name,
            "args": args,
        }
        write(started_event)
        started = time.monotonic()
        ctx = ToolContext(
            workspace=ensure_workspace(self.data_dir, thread_id_of(config)),
            idempotency_key=key,
        )
        result = await execute_tool(tool, ctx, args, cap=self.limits.tool_output_cap)
        duration = time.monotonic() - started
        finished: ToolFinishedEvent = {
            "type": "tool_finished",
            "tool_call_id": call["id"],
            "tool": tool.name,
            "ok": result.ok,
            "duration": round(duration, 4),
            "output": result.content[:2000],
        }
        record = configurable.get(RECORD_TOOL_KEY)
        if record is not None:
            # Awaited before returning: the result is checkpointed only after it is recorded.
            execution: ToolExecution = {
                "tool_call_id": call["id"],
                "tool": tool.name,
                "ok": result.ok,
                "duration": finished["duration"],
                "output": finished["output"],
                "args": args,
                "result": result.content,
            }
            if task.get("requested_by"):
                execution["requested_by"] = task["requested_by"]
            await record(execution)
        write(finished)
        return _message(call, result.content, result.ok, duration)
