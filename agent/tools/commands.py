"""The run_command tool: an allow-listed program run in the thread's workspace."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from agent.tools.base import MAX_OUTPUT_CHARS, ToolContext, ToolError, ToolSpec
from agent.tools.command import DEFAULT_ALLOWED_PROGRAMS, format_command_result, run_program
from agent.tools.sandbox import Sandbox, default_sandbox

MAX_TIMEOUT = 120.0
"""Longest timeout a call may ask for, in seconds."""
_OUTPUT_CAP = MAX_OUTPUT_CHARS - 1_000
"""Room left for the command line and the exit status around the output."""


def command_tool(
    *,
    allowed: Sequence[str] = DEFAULT_ALLOWED_PROGRAMS,
    default_timeout: float = 30.0,
    sandbox: Sandbox | None = None,
) -> ToolSpec:
    """The run_command tool, limited to the ``allowed`` program names, confined by ``sandbox``
    (default: :func:`~agent.tools.sandbox.default_sandbox`)."""
    if not 0 < default_timeout <= MAX_TIMEOUT:
        raise ValueError(f"default_timeout must be in (0, {MAX_TIMEOUT}], not {default_timeout}")
    programs = tuple(allowed)
    box = sandbox or default_sandbox()

    # Defined here because the schema's default timeout depends on the factory's argument.
    class RunCommandArgs(BaseModel):
        """Arguments of run_command."""

        model_config = ConfigDict(extra="forbid")
        command: list[str] = Field(
            min_length=1,
            description="The program and its arguments as a list, such as "
            '["python", "-m", "unittest"]. No shell: pipes, redirects, globs, "&&" and "cd" '
            "do not work.",
        )
        timeout: float = Field(
            default=default_timeout,
            gt=0,
            le=MAX_TIMEOUT,
            description=f"Seconds before the command is killed (at most {MAX_TIMEOUT:g}).",
        )

    async def run_command(ctx: ToolContext, args: RunCommandArgs) -> str:
        result = await run_program(
            args.command,
            cwd=ctx.workspace,
            allowed=programs,
            timeout=args.timeout,
            env_extra={"THREADLINE_IDEMPOTENCY_KEY": ctx.idempotency_key},
            cap=_OUTPUT_CAP,
            sandbox=box,
        )
        text = format_command_result(args.command, result)
        if result.timed_out:
            raise ToolError(text)  # so the tool message carries status "error"
        return text  # a non-zero exit is ordinary output the model reads

    confined = (
        " It runs in a sandbox: it can write only in the workspace (and a private /tmp), has no "
        "network, and its CPU time, memory, processes and file sizes are limited."
        if box.mode != "off"
        else ""
    )
    return ToolSpec(
        name="run_command",
        description="Run a program in the workspace directory and return its combined stdout "
        f"and stderr followed by its exit code. There is no shell.{confined} Allowed programs: "
        f"{', '.join(programs)}.",
        args_schema=RunCommandArgs,
        read_only=False,
        run=run_command,
    )
