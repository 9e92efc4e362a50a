"""The real-model tests: skipped unless ``THREADLINE_REAL_MODEL_URL`` names a running server.

``make real-model`` (``python -m eval.llama_server run``) starts llama.cpp's server with
SmolLM2-135M-Instruct and sets it; by hand: ``THREADLINE_REAL_MODEL_URL=http://127.0.0.1:PORT/v1
THREADLINE_REAL_MODEL_NAME=SmolLM2-135M-Instruct pytest tests/real_model``.
"""

from __future__ import annotations

import os

import pytest

from tests.api.conftest import make_server  # noqa: F401  (the servers a test starts itself)

URL = os.environ.get("THREADLINE_REAL_MODEL_URL")
MODEL = os.environ.get("THREADLINE_REAL_MODEL_NAME", "SmolLM2-135M-Instruct")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if URL:
        return
    skip = pytest.mark.skip(
        reason="no real model server: run `make real-model`, or set THREADLINE_REAL_MODEL_URL "
        "to an OpenAI-compatible endpoint (http://HOST:PORT/v1)"
    )
    for item in items:
        if item.path.parent.name == "real_model":
            item.add_marker(skip)


@pytest.fixture
def real_model_url() -> str:
    assert URL, "THREADLINE_REAL_MODEL_URL is not set"
    return URL
