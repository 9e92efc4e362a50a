"""run_program and the run_command tool: allow-list, environment, timeouts, cleanup, output cap.

These run in the default sandbox (``auto``) where it can start; the ones that watch host pids
of grandchildren run unconfined (``OFF``), since a confined process's pid is its namespace's.
``test_sandbox.py`` covers the confinement itself and the same cleanup, confined.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent.tools import (
    DEFAULT_ALLOWED_PROGRAMS,
    CommandResult,
    ToolContext,
    ToolError,
    ToolResult,
    execute_tool,
    run_program,
)
from agent.tools.command import SAFE_PATH, _HeadTail, format_command_result
from agent.tools.commands import command_tool
from agent.tools.sandbox import Sandbox

OFF = Sandbox("off")

# A child that starts a grandchild (which records its pid, then sleeps) and then sleeps itself.
SPAWN_AND_SLEEP = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c",
    "import os, time; open('gc.tmp', 'w').write(str(os.getpid())); "
    "os.rename('gc.tmp', 'gc.pid'); time.sleep(60)"])
while not os.path.exists('gc.pid'):
    time.sleep(0.01)
print('ready', flush=True)
time.sleep(60)
"""


async def run(ctx: ToolContext, sandbox: Sandbox | None = None, **args: Any) -> ToolResult:
    return await execute_tool(command_tool(sandbox=sandbox), ctx, args)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a killed process whose new parent has not reaped it yet is a zombie: it is gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _gone_soon(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


def _read_if_exists(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


async def _wait_for_file(path: Path, within: float = 5.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if (text := _read_if_exists(path)) is not None:
            return text
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


async def test_successful_command_output_and_exit_code(ctx: ToolContext) -> None:
    result = await run(ctx, command=["echo", "hello", "world"])
    assert result == ToolResult(ok=True, content="$ echo hello world\nhello world\n[exit code 0]")


async def test_non_zero_exit_is_ordinary_output(ctx: ToolContext) -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    result = await run(ctx, command=["python", "-c", code])
    assert result.ok
    assert "out\nerr" in result.content  # stderr merged into the same stream, in order
    assert result.content.endswith("[exit code 3]")


async def test_runs_in_the_workspace_with_the_service_interpreter(ctx: ToolContext) -> None:
    (ctx.workspace / "data.txt").write_text("from workspace\n")
    code = "import os, sys; print(os.getcwd(), sys.executable, open('data.txt').read(), sep='\\n')"
    result = await run_program(
        ["python3", "-c", code], cwd=ctx.workspace, allowed=DEFAULT_ALLOWED_PROGRAMS, timeout=10
    )
    cwd, exe, data = result.output.splitlines()[:3]
    assert Path(cwd) == ctx.workspace  # getcwd() is already resolved
    assert exe == sys.executable
    assert data == "from workspace"
    assert result.exit_code == 0 and not result.timed_out


async def test_environment_is_scrubbed(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://secret")
    code = "import os; print(os.environ.get('OPENAI_API_KEY')); print(sorted(os.environ))"
    result = await run(ctx, command=["python", "-c", code])
    assert result.ok
    assert "sk-should-not-leak" not in result.content
    assert "postgres://secret" not in result.content
    lines = result.content.splitlines()
    assert lines[1] == "None"
    names = set(eval(lines[2]))
    names.discard("LC_CTYPE")  # some interpreters set it themselves at startup
    names.discard("PWD")  # bwrap sets it to the directory it starts the command in
    assert names == {
        "PATH",
        "HOME",
        "LANG",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "THREADLINE_IDEMPOTENCY_KEY",
    }


async def test_environment_values(ctx: ToolContext) -> None:
    code = (
        "import os; print(os.environ['THREADLINE_IDEMPOTENCY_KEY']); "
        "print(os.environ['HOME']); print(os.environ['PATH'])"
    )
    result = await run(ctx, command=["python", "-c", code])
    key, home, path = result.content.splitlines()[1:4]
    assert key == ctx.idempotency_key
    assert Path(home) == ctx.workspace
    assert path == SAFE_PATH


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["sh", "-c", "echo pwned"], "is not allowed"),
        (["bash", "-c", "echo pwned"], "is not allowed"),
        (["/bin/sh", "-c", "echo pwned"], "bare program name"),
        (["./python"], "bare program name"),
        (["/usr/bin/python3", "-c", "print(1)"], "bare program name"),
        (["curl", "http://example.com"], "is not allowed"),
    ],
)
async def test_programs_outside_the_allow_list_are_refused(
    ctx: ToolContext, argv: list[str], phrase: str
) -> None:
    result = await run(ctx, command=argv)
    assert not result.ok
    assert phrase in result.content
    assert "Allowed programs: python, python3, ls" in result.content
    assert "pwned" not in result.content


async def test_custom_allow_list(ctx: ToolContext) -> None:
    tool = command_tool(allowed=("echo",))
    assert "Allowed programs: echo." in tool.description
    refused = await execute_tool(tool, ctx, {"command": ["python", "-c", "print(1)"]})
    assert not refused.ok
    assert "Allowed programs: echo." in refused.content
    allowed = await execute_tool(tool, ctx, {"command": ["echo", "hi"]})
    assert allowed.ok


async def test_allowed_but_missing_program(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="not installed"):
        await run_program(
            ["no-such-program-xyz"], cwd=ctx.workspace, allowed=["no-such-program-xyz"], timeout=5
        )


async def test_timeout_kills_child_and_grandchild(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await run(ctx, OFF, command=["python", "-c", SPAWN_AND_SLEEP], timeout=1.5)
    elapsed = time.monotonic() - started
    assert elapsed < 5
    assert not result.ok  # a timeout is an error result
    assert "ready" in result.content  # partial output is kept
    assert "[timed out after 1." in result.content
    assert "the process was killed" in result.content
    grandchild = int((ctx.workspace / "gc.pid").read_text())
    assert await _gone_soon(grandchild)


async def test_timeout_result_fields(ctx: ToolContext) -> None:
    result = await run_program(
        ["python", "-c", "import time; time.sleep(30)"],
        cwd=ctx.workspace,
        allowed=DEFAULT_ALLOWED_PROGRAMS,
        timeout=0.5,
    )
    assert result.timed_out
    assert result.exit_code is None
    assert 0.5 <= result.duration < 4


async def test_cancellation_kills_the_process_group(ctx: ToolContext) -> None:
    task = asyncio.create_task(
        run_program(
            ["python", "-c", SPAWN_AND_SLEEP],
            cwd=ctx.workspace,
            allowed=DEFAULT_ALLOWED_PROGRAMS,
            timeout=60,
            sandbox=OFF,
        )
    )
    grandchild = int(await _wait_for_file(ctx.workspace / "gc.pid"))
    assert _alive(grandchild)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _gone_soon(grandchild)


async def test_background_grandchild_does_not_outlive_a_finished_command(
    ctx: ToolContext,
) -> None:
    code = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)"
    )
    result = await run_program(
        ["python", "-c", code],
        cwd=ctx.workspace,
        allowed=DEFAULT_ALLOWED_PROGRAMS,
        timeout=10,
        sandbox=OFF,
    )
    assert result.exit_code == 0
    assert await _gone_soon(int(result.output.strip()))


async def test_huge_output_is_capped_keeping_head_and_tail(ctx: ToolContext) -> None:
    code = "import sys; sys.stdout.write('START' + 'x' * 5_000_000 + 'END')"
    result = await run_program(
        ["python", "-c", code],
        cwd=ctx.workspace,
        allowed=DEFAULT_ALLOWED_PROGRAMS,
        timeout=10,
        cap=1_000,
    )
    assert result.exit_code == 0
    assert result.output.startswith("START")
    assert result.output.endswith("END")
    assert "5000008 bytes" in result.output
    assert len(result.output) < 1_200


async def test_tool_output_fits_the_tool_cap(ctx: ToolContext) -> None:
    result = await run(ctx, command=["python", "-c", "print('y' * 1_000_000)"])
    assert result.ok
    assert len(result.content) < 16_000
    assert result.content.startswith("$ python -c")
    assert result.content.endswith("[exit code 0]")  # the status line survives the cap


def test_head_tail_buffer_memory_is_bounded() -> None:
    sink = _HeadTail(100)
    for _ in range(1_000):
        sink.feed(b"a" * 999 + b"\n")
    assert len(sink.head) + len(sink.tail) <= 200
    assert sink.total == 1_000_000


async def test_invalid_output_bytes_are_replaced(ctx: ToolContext) -> None:
    code = "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end')"
    result = await run_program(
        ["python", "-c", code], cwd=ctx.workspace, allowed=DEFAULT_ALLOWED_PROGRAMS, timeout=10
    )
    assert result.output == "ok \ufffd\ufffd end"


async def test_stdin_is_closed(ctx: ToolContext) -> None:
    result = await run(ctx, command=["python", "-c", "import sys; print(repr(sys.stdin.read()))"])
    assert result.ok
    assert "''" in result.content


@pytest.mark.parametrize(
    ("args", "bad_arg"),
    [
        ({"command": "python -m unittest"}, "command"),
        ({"command": []}, "command"),
        ({"command": ["echo"], "timeout": 500}, "timeout"),
        ({"command": ["echo"], "timeout": 0}, "timeout"),
        ({"command": ["echo"], "timeout": "soon"}, "timeout"),
        ({"command": ["echo"], "shell": True}, "shell"),
    ],
)
async def test_invalid_arguments_name_the_argument(
    ctx: ToolContext, args: dict[str, Any], bad_arg: str
) -> None:
    result = await run(ctx, **args)
    assert not result.ok
    assert result.content.startswith(f"Invalid arguments for run_command: {bad_arg}")


async def test_nul_byte_in_argument_is_refused(ctx: ToolContext) -> None:
    result = await run(ctx, command=["echo", "a\0b"])
    assert not result.ok
    assert "NUL" in result.content


def test_command_tool_schema_default_timeout() -> None:
    tool = command_tool(default_timeout=12)
    params = tool.openai_schema()["function"]["parameters"]
    assert params["properties"]["timeout"]["default"] == 12
    assert params["properties"]["timeout"]["maximum"] == 120
    assert params["properties"]["command"]["minItems"] == 1
    with pytest.raises(ValueError):
        command_tool(default_timeout=500)


def test_format_command_result_variants() -> None:
    argv = ["python", "-m", "unittest"]
    failed = CommandResult(exit_code=1, output="FAILED (failures=1)\n", timed_out=False, duration=1)
    assert format_command_result(argv, failed) == (
        "$ python -m unittest\nFAILED (failures=1)\n[exit code 1]"
    )
    quiet = CommandResult(exit_code=0, output="", timed_out=False, duration=0.1)
    assert format_command_result(["true"], quiet) == "$ true\n[exit code 0]"
    slow = CommandResult(exit_code=None, output="", timed_out=True, duration=30.02)
    assert format_command_result(argv, slow) == (
        "$ python -m unittest\n[timed out after 30.0s; the process was killed. "
        "Use a shorter command or a smaller input.]"
    )
    killed = CommandResult(exit_code=-9, output="", timed_out=False, duration=0.1)
    assert format_command_result(["cat"], killed).endswith("[killed by signal 9 (SIGKILL)]")
    spaced = CommandResult(exit_code=0, output="", timed_out=False, duration=0.1)
    assert format_command_result(["echo", "a b"], spaced).startswith("$ echo 'a b'\n")


def test_nul_in_a_tools_output_is_replaced() -> None:
    """A binary file's NUL bytes cannot reach PostgreSQL's jsonb (audit log, thread values)."""
    from agent.tools.base import truncate

    assert truncate("a\0b") == "a\ufffdb"
    assert "\0" not in truncate("x\0" * 20_000, 100)
