"""What a tool is, what it receives, and how its failures reach the model.

A tool is an async function over a validated pydantic argument model and a :class:`ToolContext`.
It returns text for the model, or raises :class:`ToolError` with a message that tells the model
what it may do instead. :func:`execute_tool` is the one place that validates arguments, catches
every failure and truncates output, so the graph never sees an exception from a tool.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ValidationError

logger = logging.getLogger(__name__)

MAX_OUTPUT_CHARS = 16_000
"""Cap on the text a tool returns to the model; longer output is cut in the middle with a note."""


class ToolError(Exception):
    """A refusal or failure the model can act on; the message says what to do instead."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool call knows about where it runs."""

    workspace: Path
    """The thread's workspace directory (absolute, resolved, existing)."""
    idempotency_key: str
    """``"{thread_id}:{tool_call_id}"``: the same for every attempt of one call."""


ToolFn = Callable[[ToolContext, Any], Awaitable[str]]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model can call."""

    name: str
    description: str
    args_schema: type[BaseModel]
    read_only: bool
    """Read-only tools are approved automatically by the default policy."""
    run: ToolFn

    def openai_schema(self) -> dict[str, Any]:
        """The function schema bound to chat models."""
        return convert_to_openai_tool(
            {
                **self.args_schema.model_json_schema(),
                # after the spread: the model's own "title" (its class name) must not win
                "title": self.name,
                "description": self.description,
            }
        )

    def validate_args(self, raw: dict[str, Any]) -> BaseModel:
        """Validate arguments; raises ``pydantic.ValidationError``."""
        return self.args_schema.model_validate(raw)


@dataclass(frozen=True)
class ToolResult:
    """What a call produced: its text for the model and whether it succeeded."""

    ok: bool
    content: str


def truncate(text: str, cap: int = MAX_OUTPUT_CHARS) -> str:
    """Keep the head and tail of ``text`` within ``cap`` characters, saying what was cut.

    NUL characters (a binary file's bytes, say) become U+FFFD: PostgreSQL's ``jsonb``, where
    the audit log and the thread's last values live, cannot store them, and a tool's output must
    never be what breaks its run."""
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    if len(text) <= cap:
        return text
    keep = cap // 2
    cut = len(text) - 2 * keep
    note = f"[... {cut} characters cut: output is capped at {cap} ...]"
    return f"{text[:keep]}\n{note}\n{text[-keep:]}"


def _type_name(annotation: Any) -> str:
    """``str`` for a plain class, the full form (``list[str]``) for anything else."""
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def describe_validation_error(tool: ToolSpec, err: ValidationError) -> str:
    """An error text that names each bad argument and the expected shape."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in err.errors()
    )
    # A model without fields (an MCP tool's JSON schema): the names its schema lists.
    fields = ", ".join(
        f"{name}: {_type_name(field.annotation)}"
        for name, field in tool.args_schema.model_fields.items()
    ) or ", ".join(tool.args_schema.model_json_schema().get("properties", {}))
    return f"Invalid arguments for {tool.name}: {problems}. Expected arguments: {fields}."


async def execute_tool(
    tool: ToolSpec, ctx: ToolContext, raw_args: dict[str, Any], *, cap: int = MAX_OUTPUT_CHARS
) -> ToolResult:
    """Run one call; never raises for a failure of the tool or of its arguments."""
    try:
        args = tool.validate_args(raw_args)
    except ValidationError as err:
        return ToolResult(ok=False, content=describe_validation_error(tool, err))
    try:
        out = await tool.run(ctx, args)
    except ToolError as err:
        return ToolResult(ok=False, content=truncate(str(err), cap))
    except Exception as err:  # a bug in a tool must not crash the run: report it to the model
        logger.exception("tool %s failed", tool.name)
        return ToolResult(
            ok=False,
            content=f"{tool.name} failed unexpectedly ({type(err).__name__}: {err}). "
            "Try different arguments or another tool.",
        )
    return ToolResult(ok=True, content=truncate(out, cap))
