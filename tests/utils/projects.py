"""Serving a project of ``tests/projects`` as a team deploys it, unchanged: its own
``langgraph.json`` (``"dependencies": ["."]``, ``"env": ".env"``), no ``PYTHONPATH``.

The projects are templates: a test copies one to a temporary directory and writes its ``.env``
there (the scripted model's address is known only when the test runs; a ledger file the project's
tools append a line to for each call, so a test can count what ran). Also here: what a scripted
model reads of a request, and the SDK's stream parts as ``(event, data)`` pairs.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.api.conftest import FAST
from tests.utils.fake_openai import FakeOpenAIServer
from tests.utils.server import LEAKY_ENV, ServerProcess

PROJECTS = Path(__file__).resolve().parent.parent / "projects"
NAMESPACE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
"""A task id, as it ends a namespace (``tools:<task id>``)."""

Part = tuple[str, Any]
"""An SSE event of a run as the SDK gives it: its name and its data."""


@dataclass
class ProjectCopy:
    """``tests/projects/<name>`` copied to ``<root>/<name>``, its ledger ``<root>/ledger.txt``."""

    name: str
    root: Path

    @property
    def dir(self) -> Path:
        return self.root / self.name

    @property
    def config(self) -> Path:
        return self.dir / "langgraph.json"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.txt"

    def write_env(self, values: dict[str, str]) -> None:
        """The project's ``.env``: read by the server when it loads the project (each start)."""
        self.dir.joinpath(".env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def server(self, database_url: str) -> ServerProcess:
        """A server of the project (not started), with short leases."""
        proc = ServerProcess(
            database_url, self.root / "data", config=self.config, name=self.name, **FAST
        )
        # The model's key and address come from the project's .env, never from the caller.
        assert {"OPENAI_API_KEY", "OPENAI_BASE_URL"} <= set(LEAKY_ENV)
        assert not {"OPENAI_API_KEY", "OPENAI_BASE_URL"} & set(proc.env)
        return proc

    def ledger_lines(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    async def wait_for_line(self, line: str, timeout: float = 30.0) -> None:
        """Until a tool wrote ``line`` to the ledger (bounded)."""
        deadline = time.monotonic() + timeout
        while line not in self.ledger_lines():
            assert time.monotonic() < deadline, f"no {line!r} in {self.ledger_lines()}"
            await asyncio.sleep(0.05)


def copy_project(name: str, root: Path) -> ProjectCopy:
    """``tests/projects/<name>`` copied under ``root`` (without caches or a ``.env``)."""
    project = ProjectCopy(name, root)
    shutil.copytree(
        PROJECTS / name, project.dir, ignore=shutil.ignore_patterns("__pycache__", ".env")
    )
    return project


def model_env(model: FakeOpenAIServer) -> dict[str, str]:
    """The ``.env`` lines that point ``ChatOpenAI`` at the scripted model."""
    return {"OPENAI_API_KEY": model.api_key, "OPENAI_BASE_URL": model.base_url}


# -- what a scripted model reads of a Chat Completions request --------------------------------


def system_prompt(request: dict[str, Any]) -> str:
    """The request's system message (the text of its parts, when it has parts); "" without."""
    messages = request.get("messages") or []
    if not messages or messages[0].get("role") != "system":
        return ""
    content = messages[0].get("content") or ""
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def tools_called(request: dict[str, Any]) -> list[str]:
    """The names of the tool calls the conversation so far holds, in order."""
    return [
        call["function"]["name"]
        for message in request.get("messages") or []
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    ]


# -- stream parts -------------------------------------------------------------------------------


async def parts_of(stream: AsyncIterator[Any], timeout: float = 60.0) -> list[Part]:
    """Every part of an SDK stream as ``(event, data)``, bounded in time."""

    async def read() -> list[Part]:
        return [(part.event, part.data) async for part in stream]

    return await asyncio.wait_for(read(), timeout)


def kinds(parts: Iterable[Part]) -> list[str]:
    """Event names with each namespace's task id replaced by ``<id>`` (``updates|tools:<id>``),
    without threadline's closing ``end`` (LangGraph's server sends none)."""
    return [re.sub(":" + NAMESPACE, ":<id>", event) for event, _ in parts if event != "end"]


def namespaces(parts: Iterable[Part], prefix: str) -> list[str]:
    """The distinct namespaces (``<prefix>:<task id>``) of the events, in order of arrival."""
    found: list[str] = []
    for event, _ in parts:
        for ns in event.split("|")[1:]:
            if re.fullmatch(f"{prefix}:{NAMESPACE}", ns) and ns not in found:
                found.append(ns)
    return found


def updates_in(parts: Iterable[Part], namespace: str = "") -> list[dict[str, Any]]:
    """The ``updates`` chunks of one namespace ("" for the graph's own), in order."""
    name = f"updates|{namespace}" if namespace else "updates"
    return [data for event, data in parts if event == name]


def messages_of(update: dict[str, Any], node: str) -> list[dict[str, Any]]:
    """The messages a node's update adds (``{node: {"messages": [...]}}``)."""
    return list((update.get(node) or {}).get("messages") or [])
