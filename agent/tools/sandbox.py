"""The operating-system sandbox commands run in: bubblewrap namespaces, user ``nobody``, rlimits.

:class:`Sandbox` turns a command into the ``bwrap`` command line that confines it. What the
command then sees:

- the thread's workspace, read-write, at its real path (it is the cwd and ``HOME`` too);
- read-only: ``/usr`` and ``/bin``, ``/sbin``, ``/lib*`` as the host has them (symlinks or
  binds), a few files of ``/etc`` (the dynamic linker's cache, time zone, nsswitch, Debian's
  alternatives), and the prefixes of the service's own Python (``python`` runs
  ``sys.executable``, so its venv and its base installation are bound, nothing else of ``/root``
  or ``/work``); a ``/etc/passwd``, ``/etc/group`` and ``/etc/hosts`` written for the sandbox,
  so no host account is listed;
- a private ``/proc`` in its own pid namespace (no ``/proc/<server pid>/environ``), a minimal
  ``/dev``, a private size-limited ``/tmp`` and ``/dev/shm``, all gone when it ends;
- only the environment ``run_program`` sets (``--clearenv``; ``bwrap`` itself starts with an
  empty one, so even ``/proc/1/environ`` holds nothing of the server's);
- no network: its own network namespace, loopback included, so the service's PostgreSQL on
  127.0.0.1:5432 is unreachable; its own IPC and UTS namespaces; a new session (no ``TIOCSTI``);
- uid and gid 65534, no capabilities, ``no_new_privs``.

Limits, set by ``prlimit(1)`` right before the command and inherited by what it starts: CPU
seconds (``RLIMIT_CPU``: ``SIGXCPU``, then ``SIGKILL`` a second later), address space per
process (``RLIMIT_AS``), processes and threads (``RLIMIT_NPROC``), file size (``RLIMIT_FSIZE``:
``SIGXFSZ``), no core files; ``run_program`` adds the wall-clock timeout and the output cap.
Memory is bounded per process, so one command can hold at most ``processes x memory_bytes`` of
address space: an aggregate bound needs a cgroup, which an unprivileged service (the Docker
image) cannot create.

The process limit, and why the two launch paths. The kernel counts ``RLIMIT_NPROC`` per user
namespace and uid, and never enforces it for the global root user: a sandbox whose processes
are root outside (``bwrap`` run by root maps the inner uid onto root) could fork without bound.
So the processes must be an unprivileged uid *outside*, each command in a user namespace of its
own (so that two commands do not share one count):

- *service not root* (the Docker image runs as uid 1000): ``bwrap`` runs unprivileged with
  ``--unshare-user --uid 65534 --disable-userns``. Outside, the processes and the files they
  create belong to the service's user, which keeps full access to the workspace.
- *service root*: ``bwrap`` runs privileged, without a user namespace (as root it can bind paths
  like ``/root/.pyenv`` whose mode 0700 the sandbox user could not traverse), and keeps only
  ``CAP_SETUID``/``CAP_SETGID`` for ``setpriv(1)``, which switches to uid 65534 with
  ``no_new_privs``; ``unshare --user`` then gives the command its own user namespace (its
  process count), and ``prlimit`` sets the limits. Before each command the workspace tree is
  handed to uid 65534 (``chown`` through directory descriptors, never following a symlink, so a
  link planted in the workspace cannot give away a host file); root reads and writes it anyway.

Measured on Linux 6.18, as root and as uid 1000: a ``python -c`` loop of ``os.fork()`` gets
``EAGAIN`` once the command has ``processes`` processes, three such loops at once each get as
far (the counts are per command), and host processes are not affected. ``--die-with-parent``
and the pid namespace make ``run_program``'s kill of ``bwrap``'s process group reach every
process of the command, and a killed service takes its commands with it.

``THREADLINE_SANDBOX`` chooses the mode: ``auto`` (the default) confines commands with ``bwrap``
when a trivial confined ``true`` starts, and otherwise refuses them with a message saying how to
enable a sandbox; ``bwrap`` is the same but the service refuses to start without it; ``off`` runs
them unconfined, as the allow-list alone did before (the service logs a warning). The
allow-list stays a second layer either way.

This module, and :mod:`agent.tools.bwrap` and :mod:`agent.tools.launch` that it builds on, use
the standard library only (a test runs them on the system Python as uid 1000).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from agent.tools.bwrap import base_args, host_layout, workspace_args
from agent.tools.launch import SANDBOX_UID, Launch, ResourceLimits, give_tree, wrapper_args

SandboxMode = Literal["auto", "bwrap", "off"]
SandboxStatus = Literal["bwrap", "off", "unavailable"]
"""What ``/info`` reports: commands confined, run unconfined on purpose, or refused."""

_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_PROBE_TIMEOUT = 10.0
ENABLE_HINT = (
    "install bubblewrap (`apt-get install bubblewrap`) and allow user namespaces "
    "(`sysctl user.max_user_namespaces` above 0; under Docker, run the container with "
    "`security_opt: [seccomp=unconfined, apparmor=unconfined, systempaths=unconfined]`, as "
    "docker-compose.yml does), or set THREADLINE_SANDBOX=off to run commands without a sandbox"
)


class SandboxUnavailable(Exception):
    """No sandbox can start, so commands are refused; the message says how to enable one."""


class Sandbox:
    """Confines commands (see the module docstring); ``probe`` decides once whether it can."""

    def __init__(
        self,
        mode: SandboxMode = "auto",
        *,
        bwrap: str = "bwrap",
        limits: ResourceLimits | None = None,
    ) -> None:
        if mode not in ("auto", "bwrap", "off"):
            raise ValueError(f"sandbox mode must be auto, bwrap or off, not {mode!r}")
        self.mode: SandboxMode = mode
        self.bwrap = bwrap
        self.limits = limits or ResourceLimits()
        self.as_root = os.geteuid() == 0
        """A root service runs ``bwrap`` privileged and drops to uid 65534 itself."""
        self._status: SandboxStatus | None = "off" if mode == "off" else None
        self.reason: str | None = None
        """Why no sandbox can start (``status == "unavailable"``)."""
        self._programs: dict[str, str] = {}
        self._base: list[str] = []
        self._system: list[str] = []
        """Host system directories bound read-only (``/usr``, ``/lib`` when not a symlink...)."""
        self._prefixes: list[str] = []
        """The interpreter's directories outside those, also bound read-only."""

    @property
    def status(self) -> SandboxStatus | None:
        """``None`` until :meth:`probe` ran (commands probe on first use)."""
        return self._status

    def describe(self) -> str:
        """A line for the start-up log."""
        if self._status == "bwrap":
            how = "as root, dropping to uid 65534" if self.as_root else "unprivileged"
            lim = self.limits
            return (
                f"bwrap ({how}); limits: {lim.cpu_seconds} s CPU, "
                f"{lim.memory_bytes // 2**20} MiB memory and {lim.file_size_bytes // 2**20} MiB "
                f"files per process, {lim.processes} processes"
            )
        if self._status == "off":
            return "off: commands run without a sandbox (THREADLINE_SANDBOX=off)"
        if self._status == "unavailable":
            return f"unavailable, commands are refused: {self.reason}. To enable it, {ENABLE_HINT}"
        return "not probed yet"

    async def probe(self) -> SandboxStatus:
        """Start a confined ``true`` once and remember whether it worked."""
        if self._status is not None:
            return self._status
        status, reason = await self._try_start()
        self._status, self.reason = status, reason
        return status

    async def start(self) -> SandboxStatus:
        """Probe at service start-up; in mode ``bwrap`` no sandbox is an error, not a refusal."""
        status = await self.probe()
        if status == "unavailable" and self.mode == "bwrap":
            raise SandboxUnavailable(
                f"THREADLINE_SANDBOX=bwrap, but no sandbox can start ({self.reason}): "
                f"{ENABLE_HINT}."
            )
        return status

    def unavailable_error(self) -> SandboxUnavailable:
        return SandboxUnavailable(
            f"Commands cannot run on this server: no operating-system sandbox is available "
            f"({self.reason}). The operator can {ENABLE_HINT}. Until then, use the file tools "
            "(list_files, read_file, write_file, edit_file) instead of running commands."
        )

    async def launch(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Launch:
        """How to start ``argv`` (an absolute program path and its arguments) confined in ``cwd``.

        Raises :class:`SandboxUnavailable` when the sandbox cannot start. The caller starts the
        subprocess with ``start_new_session=True`` and calls :meth:`Launch.close` afterwards.
        """
        status = await self.probe()
        if status == "off":
            return Launch(argv=list(argv), env=dict(env))
        if status == "unavailable":
            raise self.unavailable_error()
        return await self._confine(argv, cwd, env)

    async def _try_start(self) -> tuple[SandboxStatus, str | None]:
        missing = self._read_host()
        if missing:
            return "unavailable", missing
        true = shutil.which("true", path=_SYSTEM_PATH) or "/bin/true"
        with tempfile.TemporaryDirectory(prefix="threadline-sandbox-probe-") as tmp:
            try:
                launch = await self._confine([true], Path(tmp), {"PATH": _SYSTEM_PATH})
            except OSError as err:
                return "unavailable", f"could not prepare the sandbox: {err}"
            try:
                code, output = await _run_briefly(launch)
            except OSError as err:
                return "unavailable", f"bwrap could not start: {err}"
            finally:
                launch.close()
        if code == 0:
            return "bwrap", None
        detail = " ".join(output.split())[:500] or f"exit code {code}"
        return "unavailable", f"bwrap could not start a sandbox: {detail}"

    def _read_host(self) -> str | None:
        """Find the programs and the host layout the sandbox needs; what is missing, if any."""
        needed = ["bwrap", "prlimit", *(("setpriv", "unshare") if self.as_root else ())]
        for name in needed:
            found = shutil.which(self.bwrap if name == "bwrap" else name, path=_SYSTEM_PATH)
            if found is None:
                if name == "bwrap":
                    return f"bubblewrap is not installed (no {self.bwrap!r})"
                return f"util-linux's {name} is not installed"
            self._programs[name] = found
        self._system, self._prefixes = host_layout()
        self._base = base_args(
            self._programs["bwrap"],
            self._system,
            as_root=self.as_root,
            tmp_bytes=self.limits.tmp_bytes,
        )
        return None

    async def _confine(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> Launch:
        if self.as_root:
            await asyncio.to_thread(give_tree, cwd, SANDBOX_UID, SANDBOX_UID)
        return self._launch_in(argv, os.fspath(cwd), env)

    def _launch_in(self, argv: Sequence[str], workspace: str, env: Mapping[str, str]) -> Launch:
        """The confined launch of ``argv`` in ``workspace`` (an absolute path)."""
        mounts, fds = workspace_args(workspace, self._system, self._prefixes)
        environment = [arg for key, value in env.items() for arg in ("--setenv", key, value)]
        wrapper = wrapper_args(self._programs, self.limits, as_root=self.as_root)
        return Launch(
            argv=[
                *self._base,
                *mounts,
                *("--chdir", workspace, "--clearenv"),
                *environment,
                "--",
                *wrapper,
                *argv,
            ],
            env={},
            pass_fds=fds,
            confined=True,
        )


async def _run_briefly(launch: Launch) -> tuple[int | None, str]:
    """Run a probe to its end (bounded); its exit code and output."""
    proc = await asyncio.create_subprocess_exec(
        *launch.argv,
        env=launch.env,
        pass_fds=launch.pass_fds,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    launch.close()
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), _PROBE_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return None, f"it did not finish within {_PROBE_TIMEOUT:g} s"
    return proc.returncode, out.decode("utf-8", errors="replace")


@functools.cache
def default_sandbox() -> Sandbox:
    """The sandbox of tools built without one: ``auto``, probed on first use."""
    return Sandbox("auto")
