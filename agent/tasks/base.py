"""What a catalog task is: an instruction, a workspace template, an acceptance check, a plan."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ValidationError

from agent.state import TaskSpec

TEMPLATES = Path(__file__).parent / "templates"
MARKER = re.compile(r"\(threadline task: (?P<name>[a-z_]+) (?P<params>\{.*?\})\)\s*$", re.M)


@dataclass(frozen=True)
class PlannedCall:
    """One tool call of an offline plan."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class PlannedReply:
    """One reply of an offline plan: text, and tool calls (several run in parallel)."""

    content: str
    calls: Sequence[PlannedCall] = ()


Plan = Callable[[Any, "PlanView"], PlannedReply]


@dataclass(frozen=True)
class PlanView:
    """What a scripted plan sees of the conversation since the task started."""

    replies: int
    """AI replies already given for this task."""
    feedback: int
    """Failed acceptance checks reported back so far."""
    last_tool_results: Sequence[ToolMessage]


@dataclass(frozen=True)
class Task:
    """A demo task from the catalog."""

    name: str
    title: str
    params_model: type[BaseModel]
    instruction: Callable[[Any], str]
    check: Callable[[Any], list[str]]
    plan: Plan | None
    """The offline model's script; ``None`` for operator tasks (they need a real model)."""
    template: str | Path | None = None
    """A folder under ``agent/tasks/templates`` (shipped) or an absolute path (operator)."""
    policy: dict[str, str] = field(default_factory=dict)
    """The task's own approval rules; deployment and run rules override them."""
    kind: str = "demo"
    """What the task exercises: ``demo`` (the shipped demos), ``edit``, ``fix``, ``approval``."""

    def parse_params(self, raw: dict[str, Any] | None) -> BaseModel:
        """Validate parameters; ValueError names what is wrong and what is accepted."""
        fields = self.params_model.model_fields
        unknown = sorted(set(raw) - set(fields)) if isinstance(raw, dict) else []
        if unknown:
            # Otherwise a misspelt parameter would be ignored silently and its default used.
            raise ValueError(
                f"invalid params for task {self.name!r}: unknown {', '.join(unknown)}. "
                f"Accepted params: {', '.join(fields) or 'none'}"
            )
        try:
            return self.params_model.model_validate(raw or {})
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()
            )
            raise ValueError(
                f"invalid params for task {self.name!r}: {problems}. "
                "Accepted params: "
                + json.dumps(self.params_model.model_json_schema()["properties"])
            ) from None

    def materialize(self, raw_params: dict[str, Any] | None, workspace: Path) -> TaskSpec:
        """Copy the template into ``workspace`` and render the instruction."""
        params = self.parse_params(raw_params)
        if self.template:
            # Overwrites the template's own files only: a resumed first step copies the same bytes.
            copy_template(TEMPLATES / self.template, workspace)
        dumped = params.model_dump()
        marker = f"(threadline task: {self.name} {json.dumps(dumped, sort_keys=True)})"
        return {
            "name": self.name,
            "params": dumped,
            "instruction": f"{self.instruction(params)}\n\n{marker}",
            "check": self.check(params),
            "policy": dict(self.policy),
        }

    def describe(self) -> dict[str, Any]:
        """A JSON description for menus and ``threadline tasks``."""
        return {
            "name": self.name,
            "title": self.title,
            "params": self.params_model.model_json_schema().get("properties", {}),
            "approval_policy": dict(self.policy),
        }


def copy_template(source: Path, workspace: Path) -> None:
    """Copy a template into a workspace without following anything the workspace holds.

    The workspace is written by sandboxed commands: a symlink planted where a template file goes
    (``append.py -> /etc/passwd``) must not make the server write through it. A symlink in the
    way is removed (a file or folder is replaced by the template's), and every file is opened
    with ``O_NOFOLLOW``.
    """
    for src in sorted(source.rglob("*")):
        dst = workspace / src.relative_to(source)
        if dst.is_symlink():
            dst.unlink()
        if src.is_dir():
            if dst.exists() and not dst.is_dir():
                dst.unlink()
            dst.mkdir(exist_ok=True)
            continue
        if dst.is_dir():
            shutil.rmtree(dst)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        fd = os.open(dst, flags, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(src.read_bytes())
            os.fchmod(out.fileno(), src.stat().st_mode & 0o777)


def find_marker(messages: Sequence[BaseMessage]) -> tuple[str, dict[str, Any], int] | None:
    """The latest task marker in a human message: (task name, params, index of that message)."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, HumanMessage):
            # Content is a string, or blocks (agent-chat-ui sends [{"type": "text", ...}]).
            found = MARKER.search(msg.text)
            if found:
                return found["name"], json.loads(found["params"]), i
    return None


def plan_view(messages: Sequence[BaseMessage], start: int) -> PlanView:
    """Summarize the conversation after the task's message at ``start``."""
    tail = messages[start + 1 :]
    replies = sum(isinstance(m, AIMessage) for m in tail)
    feedback = sum(isinstance(m, HumanMessage) for m in tail)
    last_results: list[ToolMessage] = []
    for m in reversed(tail):
        if isinstance(m, ToolMessage):
            last_results.append(m)
        else:
            break
    return PlanView(replies=replies, feedback=feedback, last_tool_results=last_results[::-1])
