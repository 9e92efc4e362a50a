"""Settings fail fast, with every problem in one error."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.settings import Settings


def test_every_problem_is_reported_at_once(clean_env: None) -> None:
    with pytest.raises(ValidationError) as info:
        Settings(
            database_url="mysql://nope",
            approval_policy={"write_file": "sometimes"},
            port=70000,
        )
    text = str(info.value)
    assert "DATABASE_URL must start with postgresql://" in text
    assert "approval_policy has invalid rules" in text
    assert "port" in text
    assert info.value.error_count() == 3


def test_heartbeat_must_fit_twice_in_the_lease(clean_env: None) -> None:
    with pytest.raises(ValidationError, match="at most half of THREADLINE_LEASE_SECONDS"):
        Settings(lease_seconds=2, heartbeat_seconds=1.5)


def test_base_url_without_key_says_what_to_set(clean_env: None) -> None:
    with pytest.raises(ValidationError, match="set OPENAI_API_KEY too"):
        Settings(openai_base_url="http://localhost:11434/v1")


def test_environment_is_read_and_empty_base_url_means_openai(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db:5432/x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    monkeypatch.setenv("THREADLINE_APPROVAL_POLICY", '{"run_command": "deny"}')
    s = Settings()
    assert s.database_url == "postgresql://u@db:5432/x"
    assert s.openai_base_url is None
    assert s.openai_api_key is not None and s.openai_api_key.get_secret_value() == "sk-test"
    assert s.approval_policy == {"run_command": "deny"}
    assert s.model_label == "openai:gpt-4o-mini"


def test_offline_model_is_labelled_as_what_it_is(clean_env: None) -> None:
    assert "not a language model" in Settings().model_label


def test_checkpoint_retention_is_all_unless_set_and_names_its_choices(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().checkpoint_retention == "all"
    monkeypatch.setenv("THREADLINE_CHECKPOINT_RETENTION", "latest")
    assert Settings().checkpoint_retention == "latest"
    monkeypatch.setenv("THREADLINE_CHECKPOINT_RETENTION", "some")
    with pytest.raises(ValidationError, match="'all' or 'latest'"):
        Settings()
