"""Approval policy: which tool calls run, which ask a human first, which are refused.

The policy is the server's. Its rules come from the deployment (the operator's settings) and from
the task (tasks are defined by the server, never by a client); the built-in default asks for
every tool that is not read-only. A run may add its own rules (``config.configurable.
approval_policy``), and they can only *tighten* the server's (``auto`` → ``ask`` → ``deny``),
unless the operator explicitly allowed overrides. The rule of a call is decided once, when the
call is made, and travels with the call (see ``agent.graph``): a later run that resumes the call
cannot change it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

Decision = Literal["auto", "ask", "deny"]
DECISIONS: tuple[str, ...] = get_args(Decision)
SEVERITY: dict[str, int] = {"auto": 0, "ask": 1, "deny": 2}
"""Higher is stricter: a run's rule applies only when it is at least as strict as the server's."""
Source = Literal["run", "deployment", "task", "default"]


def validate_rules(rules: object) -> dict[str, Decision]:
    """Check rules (tool name or ``"*"`` → auto | ask | deny); ValueError says what is wrong."""
    if not isinstance(rules, Mapping):
        raise ValueError("approval_policy must be an object mapping tool names (or '*') to a rule")
    bad = {k: v for k, v in rules.items() if v not in DECISIONS or not isinstance(k, str)}
    if bad:
        raise ValueError(
            f"approval_policy has invalid rules {bad!r}: each value must be one of "
            f"{', '.join(DECISIONS)}"
        )
    return {k: cast(Decision, v) for k, v in rules.items()}


def _lookup(rules: Mapping[str, Decision], tool: str) -> Decision | None:
    return rules.get(tool) or rules.get("*")


@dataclass(frozen=True)
class Ruling:
    """The rule of one call and where it came from (recorded with the call's interrupt)."""

    rule: Decision
    source: Source
    server_rule: Decision
    """What the deployment and the task alone say (the floor a run cannot go below)."""

    def as_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "source": self.source, "server_rule": self.server_rule}


@dataclass(frozen=True)
class Loosening:
    """A run rule that asks for less than the server's rule for a tool."""

    tool: str
    requested: Decision
    server_rule: Decision


@dataclass(frozen=True)
class ApprovalPolicy:
    """Deployment rules over the task's rules over the built-in defaults.

    Precedence on the server side: the deployment's rules, then the task's own rules, then the
    default by the tool's read-only flag (read-only ``auto``, others ``ask``); within one level an
    exact tool name wins over ``"*"``. A run's rules then apply only where they are stricter,
    unless ``allow_overrides`` (an operator setting) lets them loosen too.
    """

    rules: Mapping[str, Decision] = field(default_factory=dict)
    allow_overrides: bool = False

    def server_ruling(
        self, tool: str, *, read_only: bool, task_rules: Mapping[str, Decision] | None = None
    ) -> tuple[Decision, Source]:
        """The rule the deployment and the task give ``tool``, and which of them gave it."""
        found = _lookup(self.rules, tool)
        if found:
            return found, "deployment"
        found = _lookup(task_rules or {}, tool)
        if found:
            return found, "task"
        return ("auto" if read_only else "ask"), "default"

    def decide(
        self,
        tool: str,
        *,
        read_only: bool,
        run_rules: Mapping[str, Decision] | None = None,
        task_rules: Mapping[str, Decision] | None = None,
    ) -> Ruling:
        """The rule for one call of ``tool``."""
        server, source = self.server_ruling(tool, read_only=read_only, task_rules=task_rules)
        requested = _lookup(run_rules or {}, tool)
        if requested and (
            SEVERITY[requested] > SEVERITY[server] or (self.allow_overrides and requested != server)
        ):
            return Ruling(rule=requested, source="run", server_rule=server)
        return Ruling(rule=server, source=source, server_rule=server)

    def loosenings(
        self,
        run_rules: Mapping[str, Decision],
        tools: Iterable[tuple[str, bool]],
        task_rules: Mapping[str, Decision] | None = None,
    ) -> list[Loosening]:
        """The run rules that would loosen the server's, for ``tools`` as (name, read_only)."""
        if self.allow_overrides:
            return []
        out: list[Loosening] = []
        for name, read_only in tools:
            requested = _lookup(run_rules, name)
            if requested is None:
                continue
            server, _ = self.server_ruling(name, read_only=read_only, task_rules=task_rules)
            if SEVERITY[requested] < SEVERITY[server]:
                out.append(Loosening(tool=name, requested=requested, server_rule=server))
        return out

    def effective(
        self, tools: Iterable[tuple[str, bool]], task_rules: Mapping[str, Decision] | None = None
    ) -> dict[str, Decision]:
        """Each tool's server rule (what ``/info`` shows)."""
        return {
            name: self.server_ruling(name, read_only=read_only, task_rules=task_rules)[0]
            for name, read_only in tools
        }
