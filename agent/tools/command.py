"""Running allow-listed programs: no shell, a scrubbed environment, bounded output, no leftovers.

The allow-list limits what the model can name, not what a program can do (``python`` can do
anything its user can); it keeps commands predictable. What a program can do is limited by the
operating-system sandbox it runs in (:mod:`agent.tools.sandbox`): only the workspace, no network,
no server environment, an unprivileged user, resource limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.tools.base import MAX_OUTPUT_CHARS, ToolError, truncate
from agent.tools.sandbox import Sandbox, SandboxUnavailable, default_sandbox

DEFAULT_ALLOWED_PROGRAMS = (
    "python",
    "python3",
    "ls",
    "cat",
    "echo",
    "grep",
    "head",
    "tail",
    "wc",
    "diff",
    "sort",
    "true",
    "false",
)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""The only PATH a command sees, and the one programs are looked up in."""

_PYTHONS = frozenset({"python", "python3"})
_SIGNAL_HINTS = {
    int(signal.SIGXCPU): "it used up its CPU-time limit; do less work per command",
    int(signal.SIGXFSZ): "it wrote past the file-size limit; write smaller files",
}
_CHUNK = 64 * 1024
_REAP_TIMEOUT = 5.0


@dataclass(frozen=True)
class CommandResult:
    """How a command ended and what it printed (stdout and stderr merged, capped)."""

    exit_code: int | None
    """``None`` when it timed out and was killed; negative when a signal ended it."""
    output: str
    timed_out: bool
    duration: float
    """Seconds from start to end."""


class _HeadTail:
    """Keeps the first and last ``keep`` bytes of a stream and counts everything."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Take the next chunk, dropping from the middle once both ends are full."""
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def text(self, cap: int) -> str:
        """The decoded output within ``cap`` characters, saying what was cut."""
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped == 0:
            return truncate(bytes(self.head + self.tail).decode("utf-8", errors="replace"), cap)
        keep = cap // 2
        head = self.head.decode("utf-8", errors="replace")[:keep]
        tail = self.tail.decode("utf-8", errors="replace")[-keep:] if keep else ""
        return (
            f"{head}\n[... output was {self.total} bytes; the middle is cut: "
            f"output is capped at {cap} characters ...]\n{tail}"
        )


def _resolve_program(name: str, allowed: Sequence[str]) -> str:
    """The executable for an allow-listed bare program name, or a ToolError naming the choices."""
    choices = ", ".join(allowed)
    if not name or "/" in name or "\\" in name:
        raise ToolError(
            f"Program {name!r} must be a bare program name, not a path. "
            f"Allowed programs: {choices}."
        )
    if name not in allowed:
        raise ToolError(
            f"Program {name!r} is not allowed (commands run without a shell). "
            f"Allowed programs: {choices}."
        )
    if name in _PYTHONS:
        return sys.executable  # the workspace runs on the service's own interpreter
    found = shutil.which(name, path=SAFE_PATH)
    if found is None:
        raise ToolError(
            f"Program {name!r} is allowed but not installed on this machine. "
            f"Allowed programs: {choices}."
        )
    return found


def _kill_group(pgid: int) -> None:
    """SIGKILL every process in the group; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _drain(stream: asyncio.StreamReader, sink: _HeadTail) -> None:
    """Read ``stream`` to EOF chunk by chunk, so memory stays bounded by ``sink``."""
    while chunk := await stream.read(_CHUNK):
        sink.feed(chunk)


async def run_program(
    argv: list[str],
    *,
    cwd: Path,
    allowed: Sequence[str],
    timeout: float,
    env_extra: Mapping[str, str] | None = None,
    cap: int = MAX_OUTPUT_CHARS,
    sandbox: Sandbox | None = None,
) -> CommandResult:
    """Run ``argv`` without a shell in ``cwd``, confined by ``sandbox``; its process group is
    killed when it ends.

    ``sandbox`` defaults to :func:`~agent.tools.sandbox.default_sandbox` (``auto``); pass
    ``Sandbox("off")`` to run unconfined. Raises :class:`ToolError` for an empty command, a
    program outside ``allowed``, one that cannot start, or no sandbox available. On timeout the
    group is killed and the result has ``timed_out=True``; on cancellation the group is killed
    and ``CancelledError`` propagates.
    """
    if not argv:
        raise ToolError(
            "The command is empty. Give the program and its arguments as a list, "
            "such as ['python', '-m', 'unittest']."
        )
    if any("\0" in arg for arg in argv):
        raise ToolError("Command arguments cannot contain NUL bytes.")
    if timeout <= 0:
        raise ToolError(f"The timeout must be positive, not {timeout}.")
    executable = _resolve_program(argv[0], allowed)
    env = {
        "PATH": SAFE_PATH,
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        **(env_extra or {}),
    }
    started = time.monotonic()
    try:
        launch = await (sandbox or default_sandbox()).launch(
            [executable, *argv[1:]], cwd=cwd, env=env
        )
    except SandboxUnavailable as err:
        raise ToolError(str(err)) from None
    except OSError as err:
        raise ToolError(f"Could not prepare the workspace for {argv[0]!r}: {err}.") from err
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=cwd,
            env=launch.env,
            pass_fds=launch.pass_fds,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            # Its own process group, so killpg reaches grandchildren; confined, killing bwrap
            # also ends its pid namespace (--die-with-parent), whatever sessions it started.
            start_new_session=True,
        )
    except OSError as err:
        raise ToolError(f"Could not start {argv[0]!r}: {err}.") from err
    finally:
        launch.close()
    assert proc.stdout is not None
    sink = _HeadTail(cap)
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await _drain(proc.stdout, sink)
            await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        # On success, timeout and cancellation alike: nothing the command started outlives it
        # (a grandchild that closed its stdout would otherwise keep running unseen).
        _kill_group(proc.pid)
        with contextlib.suppress(TimeoutError):
            # Bounded: a process that escaped the group can keep a pipe open indefinitely.
            await asyncio.wait_for(proc.wait(), _REAP_TIMEOUT)
    return CommandResult(
        exit_code=None if timed_out else launch.exit_code(proc.returncode),
        output=sink.text(cap),
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )


def format_command_result(argv: Sequence[str], result: CommandResult) -> str:
    """The model-facing text: the command line, its output, then how it ended."""
    shown = shlex.join(argv)
    if len(shown) > 500:
        shown = f"{shown[:500]} ..."
    lines = [f"$ {shown}"]
    output = result.output.removesuffix("\n")
    if output:
        lines.append(output)
    if result.timed_out:
        lines.append(
            f"[timed out after {result.duration:.1f}s; the process was killed. "
            "Use a shorter command or a smaller input.]"
        )
    elif result.exit_code is not None and result.exit_code < 0:
        number = -result.exit_code
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        hint = _SIGNAL_HINTS.get(number)
        lines.append(f"[killed by signal {number} ({name}){f': {hint}' if hint else ''}]")
    else:
        lines.append(f"[exit code {result.exit_code}]")
    return "\n".join(lines)
