"""An external MCP tool's name and argument model in the agent's registry.

Names are ``{server}__{tool}``, made valid for OpenAI's ``^[A-Za-z0-9_-]{1,64}$``: other
characters become ``_``, and a name that is too long or taken is cut and given a short hash of
the original, so the same listing always gives the same names. The argument model validates
with ``jsonschema`` against the tool's own ``inputSchema`` and reports that schema, unchanged, as
its JSON schema (the model's function parameters and the approval form's ``args_schema``).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable
from typing import Any, ClassVar

import jsonschema
from pydantic import BaseModel, ConfigDict, create_model, model_validator

MAX_NAME = 64
_INVALID = re.compile(r"[^A-Za-z0-9_-]")
PERMISSIVE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def tool_name(server: str, tool: str, taken: Iterable[str] = ()) -> str:
    """The registry name of ``server``'s ``tool``, different from every name in ``taken``."""
    original = f"{server}__{tool}"
    name = _INVALID.sub("_", original)
    used = set(taken)
    if len(name) > MAX_NAME or name in used:
        suffix = f"_{_digest(original)}"
        name = name[: MAX_NAME - len(suffix)] + suffix
        salt = 0
        while name in used:  # a hash collision too: keep hashing until free (deterministic)
            salt += 1
            suffix = f"_{_digest(f'{original}#{salt}')}"
            name = name[: MAX_NAME - len(suffix)] + suffix
    return name


def tool_names(server: str, tools: Iterable[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """Registry names of a server's tools (remote name → registry name), in sorted order so
    that which of two colliding tools gets the hashed name does not depend on listing order."""
    used = set(taken)
    out: dict[str, str] = {}
    for tool in sorted(tools):
        out[tool] = tool_name(server, tool, used)
        used.add(out[tool])
    return out


def usable_schema(schema: object) -> dict[str, Any]:
    """The tool's ``inputSchema`` when it is a valid object schema, else a permissive one."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return dict(PERMISSIVE_SCHEMA)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError:
        return dict(PERMISSIVE_SCHEMA)
    out = copy.deepcopy(schema)
    out.setdefault("type", "object")
    return out


def _problem(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


class McpArgs(BaseModel):
    """Arguments of an MCP tool: any object its JSON schema accepts (see :func:`args_model`)."""

    model_config = ConfigDict(extra="allow")
    input_schema: ClassVar[dict[str, Any] | None] = None
    """The remote tool's ``inputSchema`` (set on each tool's subclass by :func:`args_model`)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_for_the_schema(cls, data: Any) -> Any:
        schema = cls.input_schema or PERMISSIVE_SCHEMA
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(
            validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]
        )
        if errors:
            raise ValueError("; ".join(_problem(e) for e in errors[:5]))
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The remote tool's own schema, not one derived from (absent) fields."""
        return copy.deepcopy(cls.input_schema or PERMISSIVE_SCHEMA)

    def arguments(self) -> dict[str, Any]:
        """The validated arguments, as sent to the server."""
        return dict(self.__pydantic_extra__ or {})


def args_model(registry_name: str, schema: object) -> type[McpArgs]:
    """An argument model for one remote tool."""
    model = create_model(f"{registry_name}_args", __base__=McpArgs)
    model.input_schema = usable_schema(schema)
    return model
