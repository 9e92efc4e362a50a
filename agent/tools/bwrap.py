"""The ``bwrap`` command line of a confined command: its namespaces, the read-only host system
and interpreter it sees, its private ``/proc``, ``/dev`` and ``/tmp``, its workspace bound
read-write and the ``/etc/passwd``, ``/etc/group`` and ``/etc/hosts`` written for it (see
:mod:`agent.tools.sandbox` for what it amounts to). Standard library only, like the sandbox.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from agent.tools.launch import SANDBOX_UID

_ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
)
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def _inside(path: str, roots: Iterable[str]) -> str | None:
    """The first of ``roots`` that ``path`` is, or lies under."""
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def _python_prefixes() -> list[str]:
    """The directories the service's interpreter needs: its venv and base installation(s)."""
    real_exe = os.path.realpath(sys.executable)
    candidates = [
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(real_exe)),
        os.path.dirname(sys.executable),
    ]
    prefixes: list[str] = []
    for candidate in sorted({os.path.abspath(c) for c in candidates if c}, key=len):
        if candidate != "/" and not _inside(candidate, prefixes):
            prefixes.append(candidate)
    return prefixes


def host_layout() -> tuple[list[str], list[str]]:
    """The host system directories bound read-only (``/usr``, ``/lib`` when not a symlink...),
    and the interpreter's directories outside those, also bound read-only."""
    system = ["/usr", *(f"/{n}" for n in _SYSTEM_DIRS if not os.path.islink(f"/{n}"))]
    system = [path for path in system if os.path.isdir(path)]
    return system, [p for p in _python_prefixes() if not _inside(p, system)]


def _data_fd(text: str) -> int:
    """A pipe's read end holding ``text``, for ``--ro-bind-data`` (small: fits the buffer)."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, text.encode())
    finally:
        os.close(write_end)
    return read_end


class _Mounts:
    """Builds ``bwrap`` mount arguments, creating each mount point's parents with mode 0755.

    (``bwrap`` 0.8 would create them 0700, which the sandbox user could not traverse.)
    """

    def __init__(self, made: Iterable[str], filled: Iterable[str]) -> None:
        self.args: list[str] = []
        self.made = set(made)
        """Directories that exist in the sandbox."""
        self.filled = list(filled)
        """Bound host directories: everything under them exists already."""

    def parents(self, dest: str) -> None:
        for parent in reversed(Path(dest).parents):
            path = str(parent)
            if path not in self.made and not _inside(path, self.filled):
                self.args += ["--perms", "0755", "--dir", path]
                self.made.add(path)

    def bind(self, option: str, src: str, dest: str) -> None:
        self.parents(dest)
        self.args += [option, src, dest]
        self.made.add(dest)
        if option in ("--ro-bind", "--bind"):
            self.filled.append(dest)


def base_args(bwrap: str, system: Sequence[str], *, as_root: bool, tmp_bytes: int) -> list[str]:
    """The arguments every confined command shares: namespaces and read-only system."""
    args = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
    ]
    if as_root:
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        uid = str(SANDBOX_UID)
        args += ["--unshare-user", "--uid", uid, "--gid", uid, "--disable-userns"]
    for path in system:
        args += ["--ro-bind", path, path]
    for name in _SYSTEM_DIRS:
        if os.path.islink(path := f"/{name}"):
            args += ["--symlink", os.readlink(path), path]
    tmp = str(tmp_bytes)
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *("--perms", "1777", "--size", tmp, "--tmpfs", "/tmp"),
        *("--perms", "1777", "--size", tmp, "--tmpfs", "/dev/shm"),
        *("--perms", "0755", "--dir", "/etc"),
    ]
    for name in _ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def workspace_args(
    workspace: str, system: Sequence[str], prefixes: Sequence[str]
) -> tuple[list[str], tuple[int, ...]]:
    """The mounts of one command in ``workspace`` (an absolute path): the interpreter's
    directories, the workspace and the ``/etc`` files written for it; and the descriptors those
    files are read from, for the subprocess to pass to ``bwrap``."""
    made = {"/", "/usr", "/proc", "/dev", "/dev/shm", "/tmp", "/etc"}
    mounts = _Mounts(made=made, filled=system)
    for prefix in prefixes:
        mounts.bind("--ro-bind", prefix, prefix)
    holder = _inside(workspace, mounts.filled)
    parent = os.path.dirname(workspace)
    if holder is not None and parent != holder:
        # A workspace inside a read-only bound directory: hide its siblings.
        mounts.parents(parent)
        mounts.args += ["--tmpfs", parent]
        mounts.made.add(parent)
        mounts.filled.remove(holder)
    mounts.bind("--bind", workspace, workspace)
    uid = SANDBOX_UID
    fds = (
        _data_fd(
            f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"sandbox:x:{uid}:{uid}:sandbox:{workspace}:/usr/sbin/nologin\n"
        ),
        _data_fd(f"root:x:0:\nsandbox:x:{uid}:\n"),
        _data_fd("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"),
    )
    etc = []
    for fd, name in zip(fds, ("passwd", "group", "hosts"), strict=True):
        etc += ["--perms", "0444", "--ro-bind-data", str(fd), f"/etc/{name}"]
    return [*mounts.args, *etc], fds
