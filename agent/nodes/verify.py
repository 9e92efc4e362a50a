"""The ``verify`` node: runs the task's acceptance check in the workspace and records a verdict."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from agent.events import VerifyEvent, event_writer
from agent.limits import Limits, guard_reason
from agent.nodes.agent_step import VERIFY_FEEDBACK_NAME, thread_id_of, zero_usage
from agent.state import AgentState, Usage, Verdict
from agent.tasks import TaskCatalog
from agent.tools import Sandbox, ToolError, ensure_workspace, run_program
from agent.tools.base import truncate

VERDICT_OUTPUT_CAP = 4_000


@dataclass
class VerifyNode:
    """Callable node: the check decides ``verified``; a failure goes back while attempts remain."""

    data_dir: Path
    limits: Limits
    tasks: TaskCatalog = field(default_factory=TaskCatalog)
    """Where the check comes from: the catalog, by the task's name (never the state's copy)."""
    sandbox: Sandbox | None = None
    """What the check runs confined by (default: ``agent.tools.default_sandbox()``)."""

    async def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        write = event_writer()
        status = state.get("status", "running")
        stop = (
            status if status in ("stuck", "budget_exceeded") else guard_reason(state, self.limits)
        )
        task = state.get("task") or {}
        check = self.tasks.check_for(task)
        if not check:
            final = stop or "agent_done"
            unchecked: VerifyEvent = {
                "type": "verify",
                "passed": None,
                "status": final,
                "detail": "no acceptance check",
            }
            write(unchecked)
            return {"status": final, "verdict": None}
        started = time.monotonic()
        refusal = ""
        try:
            result = await run_program(
                check,
                cwd=ensure_workspace(self.data_dir, thread_id_of(config)),
                allowed=[check[0]],
                timeout=self.limits.check_timeout,
                sandbox=self.sandbox,
            )
        except ToolError as err:
            # The check could not run at all (no sandbox, its program missing): nothing the
            # agent does can change that, so the verdict says why and the task ends failed.
            result, refusal = None, str(err)
        passed = result is not None and result.exit_code == 0 and not result.timed_out
        verdict: Verdict = {
            "passed": passed,
            "exit_code": result.exit_code if result else None,
            "output": truncate(result.output if result else refusal, VERDICT_OUTPUT_CAP),
        }
        attempts = state.get("verify_attempts", 0) + 1
        usage: Usage = {**(state.get("usage") or zero_usage())}
        usage["seconds"] = usage["seconds"] + time.monotonic() - started
        update: dict[str, Any] = {"verdict": verdict, "verify_attempts": attempts, "usage": usage}
        if passed:
            update["status"] = "verified"
        elif stop:
            update["status"] = stop
        elif result is not None and attempts < self.limits.max_verify_attempts:
            update["status"] = "running"
            update["messages"] = [
                HumanMessage(
                    f"The acceptance check failed (exit code {result.exit_code}"
                    f"{', timed out' if result.timed_out else ''}):\n{verdict['output']}\n"
                    "Fix the problem, then finish again.",
                    name=VERIFY_FEEDBACK_NAME,
                )
            ]
        else:
            update["status"] = "failed"
        checked: VerifyEvent = {
            "type": "verify",
            "passed": passed,
            "status": update["status"],
            "attempt": attempts,
            "exit_code": verdict["exit_code"],
            "output": verdict["output"][:2000],
        }
        write(checked)
        return update
