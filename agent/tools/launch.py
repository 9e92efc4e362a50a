"""How one command is started and as whom: the :class:`Launch` handed to the subprocess, the
:class:`ResourceLimits` that ``prlimit`` sets, and the root launch path, where a root service
hands the workspace to uid 65534 and ``setpriv`` and ``unshare`` drop the command to that uid in
a user namespace of its own (see :mod:`agent.tools.sandbox` for why). Standard library only,
like the sandbox.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SANDBOX_UID = 65534
"""The uid and gid commands run as (``nobody``), inside the sandbox and, for a root service, out."""


@dataclass(frozen=True)
class ResourceLimits:
    """Per-process limits of a confined command (``prlimit``)."""

    cpu_seconds: int = 120
    """CPU time of each process (``RLIMIT_CPU``)."""
    memory_bytes: int = 2 * 1024**3
    """Address space of each process (``RLIMIT_AS``)."""
    processes: int = 64
    """Processes and threads of the command at once, itself included (``RLIMIT_NPROC``)."""
    file_size_bytes: int = 256 * 1024**2
    """Largest file it may write (``RLIMIT_FSIZE``)."""
    tmp_bytes: int = 256 * 1024**2
    """Size of its private ``/tmp`` and of ``/dev/shm`` (each)."""


@dataclass
class Launch:
    """How to start one command: the argv, environment and descriptors for the subprocess."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    confined: bool = False

    def close(self) -> None:
        """Close the descriptors handed to ``bwrap``; call once the subprocess started."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()

    def exit_code(self, returncode: int | None) -> int | None:
        """The command's exit code, negative for a signal as ``asyncio`` reports it unconfined.

        ``bwrap`` reports a command killed by signal ``n`` as exit code ``128 + n``, as a shell
        does; this maps it back (so a program's own ``exit(137)`` also reads as ``SIGKILL``).
        """
        if self.confined and returncode is not None and 128 < returncode <= 128 + 64:
            return -(returncode - 128)
        return returncode


def give_tree(root: Path, uid: int, gid: int) -> None:
    """Make every entry under ``root`` owned by ``uid:gid``, never following a symlink.

    ``os.fwalk`` walks by directory descriptors and checks that each directory it enters is the
    one it listed, and ``fchownat(AT_SYMLINK_NOFOLLOW)`` changes a link itself: a command that
    swaps a directory for a symlink while this runs cannot make it touch anything outside.
    """
    for _dirpath, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        st = os.fstat(dirfd)
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.fchown(dirfd, uid, gid)
        for name in (*dirnames, *filenames):
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if (st.st_uid, st.st_gid) != (uid, gid):
                    os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)


def wrapper_args(
    programs: Mapping[str, str], limits: ResourceLimits, *, as_root: bool
) -> list[str]:
    """What runs inside ``bwrap`` before the command: for a root service ``setpriv`` (to uid
    65534, ``no_new_privs``) and ``unshare`` (its own user namespace), then ``prlimit``.
    ``programs`` maps those names to their paths."""
    uid = SANDBOX_UID
    lim = limits
    wrapper = []
    if as_root:
        wrapper += [
            programs["setpriv"],
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--no-new-privs",
            "--",
            programs["unshare"],
            "--user",
            f"--map-user={uid}",
            f"--map-group={uid}",
            "--",
        ]
    wrapper += [
        programs["prlimit"],
        f"--cpu={lim.cpu_seconds}:{lim.cpu_seconds + 1}",
        f"--as={lim.memory_bytes}",
        f"--nproc={lim.processes}",
        f"--fsize={lim.file_size_bytes}",
        "--core=0",
        "--",
    ]
    return wrapper
