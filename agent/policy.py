"""Approval policy: which tool calls run, which ask a human first, which are refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

Decision = Literal["auto", "ask", "deny"]
DECISIONS: tuple[str, ...] = get_args(Decision)


def validate_rules(rules: Mapping[str, object]) -> dict[str, Decision]:
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
class ApprovalPolicy:
    """Deployment rules over the built-in defaults (read-only tools ``auto``, others ``ask``).

    Precedence, highest first: the run's ``config.configurable.approval_policy``, the deployment's
    rules, the task's own rules, then the default by the tool's read-only flag. Within one level an
    exact tool name wins over ``"*"``.
    """

    rules: Mapping[str, Decision] = field(default_factory=dict)

    def decide(
        self,
        tool: str,
        *,
        read_only: bool,
        run_rules: Mapping[str, Decision] | None = None,
        task_rules: Mapping[str, Decision] | None = None,
    ) -> Decision:
        """The rule for one call of ``tool``."""
        for level in (run_rules or {}, self.rules, task_rules or {}):
            found = _lookup(level, tool)
            if found:
                return found
        return "auto" if read_only else "ask"
