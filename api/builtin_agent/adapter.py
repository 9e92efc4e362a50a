"""The built-in agent's ``GraphAdapter``: what the service does for it beyond LangGraph's rules.

Before a run is queued: its input, command and approval rules are checked (``checks``), and a new
message closes the approvals still pending. An answer to an approval is validated against the
tool's schema (422 before anything is queued). During a run: the tool node's hooks write each
execution to the audit log and return a call's recorded result instead of running it twice.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.approval import approval_calls, is_approval_request, parse_decisions, superseded_answer
from agent.events import PriorResult, ToolExecution
from agent.hooks import PRIOR_RESULT_KEY, RECORD_TOOL_KEY
from agent.policy import ApprovalPolicy
from agent.settings import AgentSettings
from agent.tasks import TaskCatalog
from agent.tools import Sandbox, ToolSpec, workspace_dir
from agent.tools.mcp import McpServerStatus
from agent.tools.mcp_journal import journal_dir
from api.builtin_agent import checks
from api.project.adapters import GraphAdapter, RunHooks, RunRequest
from api.store.audit import ToolRecord


@dataclass
class BuiltinAgent(GraphAdapter):
    settings: AgentSettings
    """The agent's settings (``agent.settings``): its model, budgets, policy."""
    data_dir: Path
    """The service's data directory, where the threads' workspaces are."""
    tools: dict[str, ToolSpec]
    """The agent's tools by name (approval edits are validated against them)."""
    tasks: TaskCatalog
    """The agent's tasks (input is checked against them)."""
    policy: ApprovalPolicy
    """The deployment's approval policy (a run's rules are checked against it)."""
    sandbox: Sandbox
    """What commands run confined by; probed at start-up (``/info`` shows its status)."""
    mcp_servers: list[McpServerStatus] = field(default_factory=list)
    """The external MCP servers and the tools each listed at start-up (in ``tools`` too)."""

    async def check_run(self, request: RunRequest) -> dict[str, Any]:
        checks.check_command(request.command)
        checks.check_input(request.input, self.tasks)
        checks.check_call(request.input, self.tools)
        thread = request.thread
        checks.check_run_policy(
            request.config,
            policy=self.policy,
            tools=self.tools,
            task_rules=checks.task_rules_for(
                self.tasks, request.input, thread["values"] if thread else None
            ),
        )
        if request.input is None or thread is None or thread["status"] != "interrupted":
            return {}
        return {
            i.id: superseded_answer(len(i.value["action_requests"]))
            for i in await request.pending()
            if is_approval_request(i.value)
        }

    def check_answer(self, value: Any, answer: Any) -> None:
        if is_approval_request(value):
            names = [name for name, _ in approval_calls(value)]
            parse_decisions(answer, [self.tools.get(n) for n in names], names)

    def run_configurable(self, hooks: RunHooks) -> dict[str, Any]:
        async def record(execution: ToolExecution) -> None:
            await hooks.record_tool(
                ToolRecord(
                    tool=execution["tool"],
                    tool_call_id=execution["tool_call_id"],
                    args=execution["args"],
                    ok=execution["ok"],
                    duration=execution["duration"],
                    output=execution["output"],
                    result=execution["result"],
                    actor=execution.get("requested_by") or "agent",
                )
            )

        async def prior(idempotency_key: str) -> PriorResult | None:
            found = await hooks.prior_result(idempotency_key)
            if found is None:
                return None
            return {"ok": found.ok, "content": found.content, "duration": found.duration}

        return {RECORD_TOOL_KEY: record, PRIOR_RESULT_KEY: prior}

    def recursion_limit(self) -> int:
        return self.settings.limits.recursion_limit()

    def replayed_call(self, chunk: Any) -> str | None:
        if (
            isinstance(chunk, dict)
            and chunk.get("type") == "tool_finished"
            and chunk.get("replayed")
        ):
            return str(chunk.get("tool_call_id"))
        return None

    def thread_deleted(self, thread_id: str) -> None:
        with contextlib.suppress(ValueError):  # an id that cannot name a workspace never had one
            workspace = workspace_dir(self.data_dir, thread_id)
            shutil.rmtree(workspace, ignore_errors=True)
            # The journal of MCP calls sent from it (agent.tools.mcp_journal), kept beside it.
            shutil.rmtree(journal_dir(workspace), ignore_errors=True)

    def check_state_update(self, values: Any, as_node: str | None) -> str | None:
        return checks.check_state_update(values, as_node)

    def thread_copied(self, source: str, target: str) -> None:
        with contextlib.suppress(ValueError):  # an id that cannot name a workspace never had one
            src = workspace_dir(self.data_dir, source)
            if src.is_dir():
                dst = workspace_dir(self.data_dir, target)
                shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)

    def describe(self) -> dict[str, Any]:
        return {
            # The model in use: "openai:<name> [at <base url>]", or the offline scripted one.
            "model": self.settings.model_label,
            # How commands run: "bwrap" (confined), "off" (unconfined, THREADLINE_SANDBOX=off)
            # or "unavailable" (refused; the start-up log says how to enable a sandbox).
            "sandbox": self.sandbox.status,
            # The deployment's rule for each tool before any task's own rules; a run may only
            # tighten these (unless overrides are allowed).
            "approval_policy": {
                "rules": dict(self.policy.rules),
                "effective": self.policy.effective(
                    (t.name, t.read_only) for t in self.tools.values()
                ),
                "run_overrides": "allowed" if self.policy.allow_overrides else "tighten only",
            },
            # Each external MCP server: transport, trusted, "ok" or "error" (and why), its tools
            # (registry name, the server's name, read_only: readOnlyHint if trusted, else false).
            "mcp_servers": {s.name: s.describe() for s in self.mcp_servers},
        }
