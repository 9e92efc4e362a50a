"""The tools an agent can call, and the workspace they act on."""

from __future__ import annotations

from collections.abc import Sequence

from agent.tools.base import ToolContext, ToolError, ToolResult, ToolSpec, execute_tool
from agent.tools.command import DEFAULT_ALLOWED_PROGRAMS, CommandResult, run_program
from agent.tools.commands import command_tool
from agent.tools.files import file_tools
from agent.tools.launch import ResourceLimits
from agent.tools.sandbox import Sandbox, SandboxUnavailable, default_sandbox
from agent.tools.workspace import (
    WorkspacePathError,
    ensure_workspace,
    list_tree,
    resolve_inside,
    workspace_dir,
)

__all__ = [
    "DEFAULT_ALLOWED_PROGRAMS",
    "CommandResult",
    "ResourceLimits",
    "Sandbox",
    "SandboxUnavailable",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "WorkspacePathError",
    "default_sandbox",
    "default_tools",
    "ensure_workspace",
    "execute_tool",
    "list_tree",
    "resolve_inside",
    "run_program",
    "workspace_dir",
]


def default_tools(
    *,
    allowed_programs: Sequence[str] = DEFAULT_ALLOWED_PROGRAMS,
    command_timeout: float = 30.0,
    sandbox: Sandbox | None = None,
) -> list[ToolSpec]:
    """list_files, read_file, write_file, edit_file and run_command, in that order; commands
    run confined by ``sandbox`` (default: :func:`default_sandbox`)."""
    return [
        *file_tools(),
        command_tool(allowed=allowed_programs, default_timeout=command_timeout, sandbox=sandbox),
    ]
