"""Tasks the operator defines: one JSON file each in a directory (``THREADLINE_TASKS_DIR``).

```json
{
  "name": "lint",
  "title": "Make the linter pass",
  "instruction": "Fix every lint error under {path}.",
  "params": {"path": {"type": "string", "default": "src", "maxLength": 200}},
  "template": "lint-template",
  "check": ["python", "-m", "pyflakes", "src"],
  "policy": {"run_command": "auto"}
}
```

``instruction`` is formatted with the parameters (``{name}``); ``params`` declares each one with a
JSON-schema ``type`` (string, integer, number, boolean) and optional ``default``, ``description``,
``enum``, ``minimum``/``maximum``, ``minLength``/``maxLength``: a run may pass only these.
``template`` is a folder, relative to the file, copied into the workspace; ``check`` is the
acceptance check, a fixed program and arguments (parameters are not substituted into it, so no
client value ever becomes part of a command); ``policy`` the task's approval rules. Operator
tasks have no offline plan: they need a real model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from agent.policy import validate_rules
from agent.tasks.base import Task

NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
_CONSTRAINTS = {
    "minimum": "ge",
    "maximum": "le",
    "minLength": "min_length",
    "maxLength": "max_length",
}


class TaskFileError(ValueError):
    """An operator task file is invalid; the message names the file and the problem."""


class _Param(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: str
    default: Any = None
    description: str | None = None
    enum: list[Any] | None = None
    minimum: float | None = None
    maximum: float | None = None
    minLength: int | None = None
    maxLength: int | None = None


class _TaskFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    title: str
    instruction: str
    params: dict[str, _Param] = Field(default_factory=dict)
    template: str | None = None
    check: list[str] | None = Field(None, min_length=1)
    policy: dict[str, str] = Field(default_factory=dict)


def _params_model(name: str, params: dict[str, _Param]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for key, p in params.items():
        if p.type not in _TYPES:
            raise TaskFileError(f"param {key!r}: type must be one of {', '.join(_TYPES)}")
        kind: Any = _TYPES[p.type]
        if p.enum:
            from typing import Literal

            kind = Literal[tuple(p.enum)]
        limits = {
            arg: getattr(p, attr)
            for attr, arg in _CONSTRAINTS.items()
            if getattr(p, attr) is not None
        }
        default = ... if p.default is None else p.default
        fields[key] = (kind, Field(default, description=p.description, **limits))
    return create_model(
        f"{name.title().replace('_', '')}Params",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )


def load_task_file(path: Path) -> Task:
    """One operator task; TaskFileError says what is wrong."""
    try:
        spec = _TaskFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as err:
        raise TaskFileError(f"task file {path}: {err}") from None
    if not NAME.fullmatch(spec.name):
        raise TaskFileError(f"task file {path}: name must match {NAME.pattern}")
    try:
        validate_rules(spec.policy)
        params_model = _params_model(spec.name, spec.params)
    except (ValueError, TypeError) as err:
        raise TaskFileError(f"task file {path}: {err}") from None
    template: Path | None = None
    if spec.template:
        template = (path.parent / spec.template).resolve()
        if not template.is_dir():
            raise TaskFileError(f"task file {path}: template folder {template} does not exist")
    instruction, check = spec.instruction, spec.check

    def render(params: Any) -> str:
        try:
            return instruction.format(**params.model_dump())
        except (KeyError, IndexError, ValueError):
            return instruction

    return Task(
        name=spec.name,
        title=spec.title,
        params_model=params_model,
        instruction=render,
        check=lambda _params: list(check) if check else [],
        plan=None,
        template=template,
        policy=dict(spec.policy),
        kind="operator",
    )


def load_task_dir(directory: Path) -> list[Task]:
    """Every ``*.json`` task in ``directory``, sorted by file name."""
    if not directory.is_dir():
        raise TaskFileError(f"THREADLINE_TASKS_DIR {directory} is not a directory")
    return [load_task_file(p) for p in sorted(directory.glob("*.json"))]
