"""``python -m eval`` names the model it measured: its name, endpoint kind and settings.

Against any OpenAI-compatible endpoint (here the scripted test server, over real HTTP from a
real ``threadline serve``), and in the report of every result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.model_info import describe, endpoint_kind
from tests.eval.test_runner import run_main
from tests.utils.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.timeout(150)


def test_endpoint_kinds() -> None:
    assert endpoint_kind(None, False) == "offline"
    assert endpoint_kind("http://10.0.0.2:8000/v1", False) == "offline"
    assert endpoint_kind(None, True) == "openai"
    assert endpoint_kind("https://api.openai.com/v1", True) == "openai"
    assert endpoint_kind("http://10.0.0.2:8000/v1", True) == "openai-compatible at 10.0.0.2:8000"


def test_model_of_a_server_the_runner_did_not_start() -> None:
    remote = describe(None, {"model": "openai:qwen2.5 at http://gpu:8001/v1"})
    assert remote == {
        "name": "qwen2.5",
        "endpoint": "openai-compatible at gpu:8001",
        "base_url": "http://gpu:8001/v1",
        "settings": {"temperature": 0.0},
        "settings_known": False,
    }
    assert describe(None, {"model": "openai:gpt-4o"})["endpoint"] == "openai"
    offline = describe(None, {"model": "offline (scripted, not a language model)"})
    assert offline["endpoint"] == "offline" and offline["settings"] == {}


def test_an_openai_compatible_endpoint_is_evaluated_and_named(
    tmp_path: Path, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the runner then sends "not-needed"
    suite = tmp_path / "one.json"
    suite.write_text(
        json.dumps({"name": "one", "tasks": [{"task": "counter", "params": {"n": 2}}]})
    )
    with FakeOpenAIServer(responder=lambda _: "I am done.", api_key="not-needed") as model:
        code, result, report = run_main(
            tmp_path, pg_admin_url, str(suite),
            "--openai-base-url", model.base_url, "--openai-model", "tiny-7b",
            "--openai-timeout", "9", "--server-env", "THREADLINE_MAX_VERIFY_ATTEMPTS=1",
        )  # fmt: skip

    assert code == 0  # a task the model fails is a measurement, not a broken promise
    assert {r["model"] for r in model.requests} == {"tiny-7b"}
    # One answer without tool calls, its check failed once: THREADLINE_MAX_VERIFY_ATTEMPTS
    # reached the server.
    assert len(model.requests) == 1 and result["metrics"]["overall"]["pass_at_1"] == 0.0
    host = model.base_url.split("//")[1].split("/")[0]
    assert result["model"]["name"] == "tiny-7b"
    assert result["model"]["endpoint"] == f"openai-compatible at {host}"
    assert result["model"]["settings"]["timeout"] == 9.0
    assert result["model"]["settings"]["max_retries"] == 2
    assert result["model"]["settings"]["temperature"] == 0.0
    text = report.read_text()
    assert "### Model" in text and "| model | `tiny-7b` |" in text
    assert f"| endpoint | openai-compatible at {host} |" in text
    assert "| settings | temperature 0.00, timeout 9.00, max_retries 2, max_tokens -" in text
    assert f"| cost | {result['metrics']['overall']['tokens']} tokens" in text
