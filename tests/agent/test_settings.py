"""The built-in agent's settings fail fast as the service's do: every problem in one error, each
naming its variable; lists and objects are read as people write them in the environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent.limits import Limits
from agent.settings import AgentSettings
from cli.main import settings_problems


def test_every_problem_is_reported_at_once(clean_env: None) -> None:
    with pytest.raises(ValidationError) as info:
        AgentSettings(approval_policy={"write_file": "sometimes"}, max_steps=0, openai_timeout=0)
    text = str(info.value)
    assert "approval_policy has invalid rules" in text
    assert "max_steps" in text
    assert "OPENAI_TIMEOUT" in text
    assert info.value.error_count() == 3


def test_base_url_without_key_says_what_to_set(clean_env: None) -> None:
    with pytest.raises(ValidationError, match="set OPENAI_API_KEY too"):
        AgentSettings(openai_base_url="http://localhost:11434/v1")


def test_environment_is_read_and_empty_base_url_means_openai(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    monkeypatch.setenv("THREADLINE_APPROVAL_POLICY", '{"run_command": "deny"}')
    monkeypatch.setenv("THREADLINE_MAX_STEPS", "7")
    s = AgentSettings()
    assert s.openai_base_url is None
    assert s.openai_api_key is not None and s.openai_api_key.get_secret_value() == "sk-test"
    assert s.approval_policy == {"run_command": "deny"}
    assert s.model_label == "openai:gpt-4o-mini"
    assert s.limits.max_steps == 7


def test_a_base_url_is_in_the_label(clean_env: None) -> None:
    s = AgentSettings(openai_api_key="sk-x", openai_base_url="http://gpu:8000/v1", openai_model="q")
    assert s.model_label == "openai:q at http://gpu:8000/v1"


def test_offline_model_is_labelled_as_what_it_is(clean_env: None) -> None:
    assert "not a language model" in AgentSettings().model_label


def test_the_default_budgets_are_the_agents(clean_env: None) -> None:
    assert AgentSettings().limits == Limits()


def test_every_list_setting_takes_both_forms(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [n for n, f in AgentSettings.model_fields.items() if "list[str]" in str(f.annotation)]
    assert {"freeform_check", "allowed_programs"} <= set(names)
    for raw in ("python, -m,pytest", '["python", "-m", "pytest"]'):
        for name in names:
            monkeypatch.setenv(f"THREADLINE_{name.upper()}", raw)
        s = AgentSettings()
        for name in names:
            assert getattr(s, name) == ["python", "-m", "pytest"], name


def test_an_empty_list_or_object_setting_means_its_default(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FREEFORM_CHECK", "ALLOWED_PROGRAMS", "APPROVAL_POLICY", "MCP_SERVERS"):
        monkeypatch.setenv(f"THREADLINE_{name}", " ")
    s = AgentSettings()
    assert (s.freeform_check, s.allowed_programs, s.approval_policy, s.mcp_servers) == (
        None,
        None,
        {},
        {},
    )


@pytest.mark.parametrize(
    ("name", "raw", "says"),
    [
        ("THREADLINE_APPROVAL_POLICY", "notjson", "not valid JSON"),
        ("THREADLINE_MCP_SERVERS", "{bad", "not valid JSON"),
        ("THREADLINE_APPROVAL_POLICY", '["run_command"]', "valid dictionary"),
        ("THREADLINE_FREEFORM_CHECK", '["pytest", ', "not a valid JSON array"),
        ("OPENAI_TIMEOUT", "soon", "valid number"),
    ],
)
def test_a_malformed_setting_is_a_validation_error_naming_its_variable(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, name: str, raw: str, says: str
) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(ValidationError) as info:
        AgentSettings()
    [problem] = settings_problems(info.value)
    assert problem.startswith(name) and says in problem, problem
