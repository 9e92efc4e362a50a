"""The approval policy: the server's rules are a floor that a run's rules can only raise."""

from __future__ import annotations

import pytest

from agent.policy import ApprovalPolicy, validate_rules

TOOLS = [("read_file", True), ("write_file", False), ("run_command", False)]


def test_defaults_ask_for_writes_and_pass_reads() -> None:
    policy = ApprovalPolicy()
    assert policy.decide("read_file", read_only=True).rule == "auto"
    ruling = policy.decide("write_file", read_only=False)
    assert (ruling.rule, ruling.source) == ("ask", "default")


def test_deployment_rules_beat_the_tasks_and_the_default() -> None:
    policy = ApprovalPolicy({"run_command": "deny"})
    ruling = policy.decide("run_command", read_only=False, task_rules={"run_command": "auto"})
    assert (ruling.rule, ruling.source) == ("deny", "deployment")
    ruling = policy.decide("write_file", read_only=False, task_rules={"*": "auto"})
    assert (ruling.rule, ruling.source) == ("auto", "task")


@pytest.mark.parametrize(
    ("run", "server", "expected"),
    [
        ("auto", "ask", "ask"),
        ("auto", "deny", "deny"),
        ("ask", "deny", "deny"),
        ("ask", "auto", "ask"),
        ("deny", "ask", "deny"),
        ("deny", "auto", "deny"),
    ],
)
def test_a_run_only_tightens(run: str, server: str, expected: str) -> None:
    policy = ApprovalPolicy({"write_file": validate_rules({"x": server})["x"]})
    rules = validate_rules({"*": run})
    assert policy.decide("write_file", read_only=False, run_rules=rules).rule == expected


def test_overrides_let_a_run_loosen_when_the_operator_allows_it() -> None:
    policy = ApprovalPolicy({"write_file": "deny"}, allow_overrides=True)
    ruling = policy.decide("write_file", read_only=False, run_rules={"write_file": "auto"})
    assert (ruling.rule, ruling.source) == ("auto", "run")
    assert policy.loosenings({"*": "auto"}, TOOLS) == []


def test_loosenings_name_each_tool_a_run_would_loosen() -> None:
    policy = ApprovalPolicy({"run_command": "deny"})
    loose = policy.loosenings({"*": "auto"}, TOOLS)
    assert [(x.tool, x.requested, x.server_rule) for x in loose] == [
        ("write_file", "auto", "ask"),
        ("run_command", "auto", "deny"),
    ]
    assert policy.loosenings({"run_command": "auto"}, TOOLS, {"run_command": "auto"}) == [
        policy.loosenings({"run_command": "auto"}, TOOLS)[0]
    ]
    assert policy.loosenings({"*": "deny"}, TOOLS) == []
    assert (
        ApprovalPolicy().loosenings({"run_command": "auto"}, TOOLS, {"run_command": "auto"}) == []
    )


def test_malformed_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="auto, ask, deny"):
        validate_rules({"write_file": "sometimes"})
    with pytest.raises(ValueError, match="object"):
        validate_rules(["auto"])
