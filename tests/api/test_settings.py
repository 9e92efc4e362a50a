"""Settings fail fast, with every problem in one error (the built-in agent's own settings:
``tests/agent/test_settings.py``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings.exceptions import SettingsError

from api.platform.settings import Settings
from cli.main import load_settings, settings_problems
from tests.conftest import scrubbed_environ
from tests.utils.cli import threadline_command
from tests.utils.db import TEST_DATABASE_ENV


def test_every_problem_is_reported_at_once(clean_env: None) -> None:
    with pytest.raises(ValidationError) as info:
        Settings(database_url="mysql://nope", workers=0, port=70000)
    text = str(info.value)
    assert "DATABASE_URL must start with postgresql://" in text
    assert "workers" in text
    assert "port" in text
    assert info.value.error_count() == 3


def test_heartbeat_must_fit_twice_in_the_lease(clean_env: None) -> None:
    with pytest.raises(ValidationError, match="at most half of THREADLINE_LEASE_SECONDS"):
        Settings(lease_seconds=2, heartbeat_seconds=1.5)


def test_environment_is_read(clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@db:5432/x")
    monkeypatch.setenv("THREADLINE_WORKERS", "3")
    s = Settings()
    assert s.database_url == "postgresql://u@db:5432/x"
    assert s.workers == 3


def test_checkpoint_retention_is_all_unless_set_and_names_its_choices(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().checkpoint_retention == "all"
    monkeypatch.setenv("THREADLINE_CHECKPOINT_RETENTION", "latest")
    assert Settings().checkpoint_retention == "latest"
    monkeypatch.setenv("THREADLINE_CHECKPOINT_RETENTION", "some")
    with pytest.raises(ValidationError, match="'all' or 'latest'"):
        Settings()


# -- values as people write them in the environment ---------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("http://127.0.0.1:3111", ["http://127.0.0.1:3111"]),
        (" http://a:1 , https://b ,, ", ["http://a:1", "https://b"]),
        ('["http://a:1", "https://b"]', ["http://a:1", "https://b"]),
        ("  [ ]  ", []),
    ],
    ids=["bare-origin", "comma-separated", "json-array", "empty-json-array"],
)
def test_a_list_setting_is_a_json_array_or_comma_separated(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, raw: str, expected: list[str]
) -> None:
    monkeypatch.setenv("THREADLINE_CORS_ORIGINS", raw)
    monkeypatch.setenv("THREADLINE_ALLOWED_HOSTS", raw)
    s = Settings()
    assert s.cors_origins == expected
    assert s.allowed_hosts == expected


def test_every_list_setting_takes_both_forms(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [n for n, f in Settings.model_fields.items() if "list[str]" in str(f.annotation)]
    assert {"allowed_hosts", "cors_origins"} <= set(names)
    for raw in ("python, -m,pytest", '["python", "-m", "pytest"]'):
        for name in names:
            monkeypatch.setenv(f"THREADLINE_{name.upper()}", raw)
        s = Settings()
        for name in names:
            assert getattr(s, name) == ["python", "-m", "pytest"], name
    for raw in ("10.0.0.0/8, ::1", '["10.0.0.0/8", "::1"]'):  # a list of networks
        monkeypatch.setenv("THREADLINE_WEBHOOK_ALLOWED_NETWORKS", raw)
        networks = Settings().webhook_allowed_networks
        assert [str(n) for n in networks] == ["10.0.0.0/8", "::1/128"]


def test_an_empty_list_setting_means_its_default(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ALLOWED_HOSTS", "CORS_ORIGINS"):
        monkeypatch.setenv(f"THREADLINE_{name}", " ")
    s = Settings()
    assert s.allowed_hosts == ["localhost", "127.0.0.1", "::1"]
    assert s.cors_origins == []


@pytest.mark.parametrize(
    ("name", "raw", "says"),
    [
        ("THREADLINE_CORS_ORIGINS", '["http://a", ', "not a valid JSON array"),
        ("THREADLINE_ALLOWED_HOSTS", "[1]", "valid string"),
    ],
)
def test_a_malformed_setting_is_a_validation_error_naming_its_variable(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, name: str, raw: str, says: str
) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(ValidationError) as info:
        Settings()
    [problem] = settings_problems(info.value)
    assert problem.startswith(name) and says in problem, problem


def test_malformed_settings_of_the_service_and_the_agent_are_reported_together(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLINE_APPROVAL_POLICY", "notjson")
    monkeypatch.setenv("THREADLINE_MCP_SERVERS", "{bad")
    monkeypatch.setenv("THREADLINE_PORT", "eighty")
    monkeypatch.setenv("OPENAI_TIMEOUT", "0")
    with pytest.raises(SystemExit) as info:
        load_settings()
    lines = str(info.value.code).splitlines()
    assert lines[0] == "threadline: invalid settings:"
    assert sorted(line.split(":")[0] for line in lines[1:]) == [
        "  - OPENAI_TIMEOUT",
        "  - THREADLINE_APPROVAL_POLICY",
        "  - THREADLINE_MCP_SERVERS",
        "  - THREADLINE_PORT",
    ]


def test_a_settings_source_error_is_described_without_a_traceback() -> None:
    error = SettingsError('error parsing value for field "cors_origins" from source "X"')
    error.__cause__ = ValueError("Expecting value: line 1 column 1 (char 0)")
    assert settings_problems(error) == [
        "THREADLINE_CORS_ORIGINS: Expecting value: line 1 column 1 (char 0)"
    ]


def test_serve_with_bad_settings_exits_with_one_message(tmp_path: Path) -> None:
    """The real command: no traceback, every problem listed, a non-zero status. Settings are
    read before anything else, so the unreachable database is never tried."""
    env = {
        **{k: v for k, v in scrubbed_environ().items() if k != TEST_DATABASE_ENV},
        "THREADLINE_DATA_DIR": str(tmp_path / "data"),
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "THREADLINE_CORS_ORIGINS": '["http://127.0.0.1:3111"',
        "THREADLINE_APPROVAL_POLICY": "notjson",
    }
    done = subprocess.run(
        [*threadline_command(), "serve", "--port", "0"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "threadline: invalid settings:", done.stderr
    assert sorted(line.split(":")[0] for line in lines[1:]) == [
        "  - THREADLINE_APPROVAL_POLICY",
        "  - THREADLINE_CORS_ORIGINS",
    ], done.stderr
    assert not (tmp_path / "data").exists()
