"""The command sandbox, attacked from inside with real processes: what a command can see and do.

Each test runs real commands through ``run_program`` (or the ``run_command`` tool) in a
workspace laid out as the service lays them out, next to another thread's workspace and the
data directory's database files, and checks that none of it is reachable. They skip only when
bubblewrap is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agent import ApprovalPolicy, build_graph
from agent.models import OfflineChatModel
from agent.tools import (
    DEFAULT_ALLOWED_PROGRAMS,
    CommandResult,
    ResourceLimits,
    Sandbox,
    SandboxUnavailable,
    ToolContext,
    ToolError,
    default_tools,
    ensure_workspace,
    execute_tool,
    run_program,
)
from agent.tools.command import format_command_result
from agent.tools.commands import command_tool
from agent.tools.launch import SANDBOX_UID, Launch

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed: apt-get install bubblewrap (.ci/run installs it)",
)

SECRET = "s3cret-" + uuid.uuid4().hex
ALLOWED = (*DEFAULT_ALLOWED_PROGRAMS, "id", "sh")
TIGHT = ResourceLimits(
    cpu_seconds=1,
    memory_bytes=512 * 2**20,
    processes=16,
    file_size_bytes=2**20,
    tmp_bytes=4 * 2**20,
)


@dataclass
class Layout:
    """A data directory as the service has it: two threads' workspaces and a database."""

    data: Path
    ws: Path
    """The workspace the commands run in (thread ``a``)."""
    other: Path
    """Thread ``b``'s secret file."""
    db: Path
    """A file of the embedded database."""


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    data = tmp_path / "data"
    ws = ensure_workspace(data, "thread-a")
    other = ensure_workspace(data, "thread-b") / "secret.txt"
    other.write_text(f"thread b's {SECRET}\n")
    db = data / "postgres" / "base" / "1234"
    db.parent.mkdir(parents=True)
    db.write_text(f"table rows {SECRET}\n")
    return Layout(data=data.resolve(), ws=ws, other=other.resolve(), db=db.resolve())


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox("bwrap")


@pytest.fixture(scope="module")
def tight() -> Sandbox:
    return Sandbox("bwrap", limits=TIGHT)


async def python(
    box: Sandbox, ws: Path, code: str, *args: str, timeout: float = 20
) -> CommandResult:
    return await run_program(
        ["python", "-c", code, *args], cwd=ws, allowed=ALLOWED, timeout=timeout, sandbox=box
    )


def exists(path: str) -> bool:
    return os.path.exists(path)


def host_pids_with(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker`` (this process excepted)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


async def none_left(marker: str, within: float = 5.0) -> bool:
    for _ in range(int(within / 0.05)):
        if not host_pids_with(marker):
            return True
        await asyncio.sleep(0.05)
    return False


def spawner(marker: str) -> str:
    """Code that starts a grandchild in a session of its own, then sleeps (both ``marker``)."""
    return (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
        f"'{marker}'], start_new_session=True)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )


# --------------------------------------------------------------------------------------------
# who it runs as, and what it can see


async def test_runs_as_an_unprivileged_user(sandbox: Sandbox, layout: Layout) -> None:
    result = await run_program(
        ["id", "-u"], cwd=layout.ws, allowed=ALLOWED, timeout=10, sandbox=sandbox
    )
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(SANDBOX_UID) != "0"
    code = "import os; print(os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups())"
    ids = (await python(sandbox, layout.ws, code)).output.split(maxsplit=4)
    assert ids[:4] == [str(SANDBOX_UID)] * 4
    assert "0" not in ids[4].strip("[]").replace(",", " ").split()  # no supplementary root
    status = await python(sandbox, layout.ws, "print(open('/proc/self/status').read())")
    caps = {
        line.split(":")[0]: line.split()[1]
        for line in status.output.splitlines()
        if line.startswith(("CapEff", "CapPrm", "NoNewPrivs"))
    }
    assert caps == {"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "NoNewPrivs": "1"}


async def test_no_server_environment_anywhere(
    sandbox: Sandbox, layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLINE_TEST_SECRET", SECRET)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres:{SECRET}@127.0.0.1:5432/x")
    code = """
import json, os
seen = {}
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            seen[pid] = [open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace'),
                         open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace')]
        except OSError as err:
            seen[pid] = [None, err.strerror]
print(json.dumps({'env': dict(os.environ), 'procs': seen, 'ppid': os.getppid()}))
"""
    result = await python(sandbox, layout.ws, code)
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    report = json.loads(result.output)
    assert "THREADLINE_TEST_SECRET" not in report["env"]
    assert "DATABASE_URL" not in report["env"]
    # Its own pid namespace: a handful of processes (bwrap's init, itself), none of the host's.
    assert len(report["procs"]) <= 3, report["procs"]
    assert not any("pytest" in (cmd or "") for cmd, _ in report["procs"].values())


async def test_no_network_not_even_loopback(sandbox: Sandbox, layout: Layout) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    code = """
import socket, sys
for host, port in [('127.0.0.1', 5432), ('127.0.0.1', int(sys.argv[1])), ('1.1.1.1', 53)]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        print('CONNECTED', host, port)
    except OSError as err:
        print('refused', host, port, type(err).__name__)
"""
    try:
        confined = await python(sandbox, layout.ws, code, str(port))
        unconfined = await python(Sandbox("off"), layout.ws, code, str(port))
    finally:
        listener.close()
    assert confined.exit_code == 0, confined.output
    assert "CONNECTED" not in confined.output
    assert confined.output.count("refused") == 3
    # The same listener is reachable without the sandbox: the test is not vacuous.
    assert f"CONNECTED 127.0.0.1 {port}" in unconfined.output


async def test_other_workspaces_and_the_data_dir_are_unreachable(
    sandbox: Sandbox, layout: Layout
) -> None:
    (layout.ws / "to-other").symlink_to(layout.other)
    (layout.ws / "to-db").symlink_to(layout.db)
    (layout.ws / "to-data").symlink_to(layout.data)
    reads = [
        str(layout.other),
        "../thread-b/secret.txt",
        "../../postgres/base/1234",
        str(layout.db),
        "to-other",
        "to-db",
        "to-data/postgres/base/1234",
        "/proc/1/environ",
        f"/proc/{os.getpid()}/environ",
    ]
    for path in reads:
        result = await run_program(
            ["cat", path], cwd=layout.ws, allowed=ALLOWED, timeout=10, sandbox=sandbox
        )
        assert result.exit_code != 0, path
        assert SECRET not in result.output, path

    async def ls(*paths: str) -> list[str]:
        result = await run_program(
            ["ls", "-a", *paths], cwd=layout.ws, allowed=ALLOWED, timeout=10, sandbox=sandbox
        )
        return result.output.split()

    assert await ls("..") == [".", "..", "thread-a"]  # only its own workspace
    assert await ls("../..") == [".", "..", "workspaces"]  # no database, no other data
    for path in ("/root", "/work", "/home", "/var", "/srv", "/opt", "/mnt"):
        assert "postgres" not in await ls(path), path


async def test_a_shell_started_from_python_is_confined_too(
    sandbox: Sandbox, layout: Layout
) -> None:
    code = (
        "import subprocess, sys; r = subprocess.run(['sh', '-c', sys.argv[1]], "
        "capture_output=True, text=True); print(r.stdout, r.stderr)"
    )
    script = f"id -u; cat {layout.other}; cat ../thread-b/secret.txt; ls /proc | wc -l; env"
    result = await python(sandbox, layout.ws, code, script)
    assert result.exit_code == 0, result.output
    assert result.output.split()[0] == str(SANDBOX_UID)
    assert SECRET not in result.output
    assert "No such file or directory" in result.output


async def test_writes_outside_the_workspace_fail_or_vanish(
    sandbox: Sandbox, layout: Layout
) -> None:
    marker = f"threadline-test-{uuid.uuid4().hex}"  # unique names: nothing real is overwritten
    targets = [
        f"/usr/{marker}",
        f"/etc/{marker}",
        f"/{marker}",
        f"/root/{marker}",
        str(layout.other.parent / marker),
        str(layout.ws.parent / marker),
    ]
    code = """
import os, sys
for path in sys.argv[2:]:
    try:
        open(path, 'w').write('planted')
        print('WROTE', path)
    except OSError as err:
        print('refused', path, err.strerror)
open('/tmp/' + sys.argv[1], 'w').write('inside only')
print('tmp', os.listdir('/tmp'))
"""
    try:
        result = await python(sandbox, layout.ws, code, marker, *targets)
        assert result.exit_code == 0, result.output
        assert "WROTE" not in result.output
        assert result.output.count("refused") == len(targets)
        assert not any(exists(path) for path in targets)
        assert not exists(f"/tmp/{marker}")  # the sandbox's /tmp is its own
        again = await python(sandbox, layout.ws, "import os; print(os.listdir('/tmp'))")
        assert marker not in again.output  # and gone when the command ends
    finally:  # should the sandbox ever fail open, leave the host as it was
        for path in [*targets, f"/tmp/{marker}"]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


# --------------------------------------------------------------------------------------------
# limits


async def test_a_fork_bomb_is_stopped_by_the_process_limit(tight: Sandbox, layout: Layout) -> None:
    count = """
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as err:
    print('stopped after', n, err.errno)
"""
    result = await python(tight, layout.ws, count)
    assert result.exit_code == 0, result.output
    words = result.output.split()
    assert words[:2] == ["stopped", "after"] and int(words[2]) < TIGHT.processes
    # A real one: every process forks forever. It churns within the limit until the timeout.
    marker = f"bomb-{uuid.uuid4().hex}"
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = await python(tight, layout.ws, bomb, marker, timeout=3)
    assert result.timed_out
    assert await none_left(marker)


async def test_a_memory_hog_is_stopped(tight: Sandbox, layout: Layout) -> None:
    result = await python(tight, layout.ws, "b = bytearray(2 * 1024**3); print('GOT IT')")
    assert "MemoryError" in result.output
    assert "GOT IT" not in result.output
    assert result.exit_code == 1


async def test_a_cpu_loop_is_stopped_by_the_cpu_limit(tight: Sandbox, layout: Layout) -> None:
    result = await python(tight, layout.ws, "while True: pass", timeout=60)
    assert not result.timed_out  # the CPU limit, not the wall-clock timeout, ended it
    assert result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL)
    assert "CPU-time limit" in format_command_result(["python"], result)


async def test_a_file_cannot_outgrow_the_file_size_limit(tight: Sandbox, layout: Layout) -> None:
    code = "open('big.bin', 'wb').write(b'x' * (8 * 1024**2))"
    result = await python(tight, layout.ws, code)
    assert result.exit_code == 1
    assert "File too large" in result.output
    assert (layout.ws / "big.bin").stat().st_size <= TIGHT.file_size_bytes


# --------------------------------------------------------------------------------------------
# the workspace, shared with the server's own file tools


async def test_the_workspace_is_writable_and_the_server_keeps_access(
    sandbox: Sandbox, layout: Layout
) -> None:
    (layout.ws / "counter.txt").write_text("1\n")  # written by the server, as templates are
    (layout.ws / "sub").mkdir()
    code = """
import fcntl, os
with open('counter.txt', 'a') as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    f.write('2\\n')
    f.flush()
    os.fsync(f.fileno())
os.makedirs('made/deeper', exist_ok=True)
open('made/deeper/out.txt', 'w').write('from the sandbox\\n')
open('sub/inner.txt', 'w').write('inner\\n')
print('ok')
"""
    result = await python(sandbox, layout.ws, code)
    assert result.exit_code == 0, result.output
    assert (layout.ws / "counter.txt").read_text() == "1\n2\n"
    made = layout.ws / "made" / "deeper" / "out.txt"
    assert made.read_text() == "from the sandbox\n"
    made.write_text("rewritten by the server\n")  # the file tools can still write it
    (layout.ws / "sub" / "inner.txt").unlink()
    shutil.rmtree(layout.ws / "made")
    if os.geteuid() != 0:
        assert (layout.ws / "counter.txt").stat().st_uid == os.geteuid()


async def test_a_symlink_in_the_workspace_does_not_give_away_host_files(
    sandbox: Sandbox, layout: Layout
) -> None:
    before = layout.other.stat()
    (layout.ws / "link").symlink_to(layout.other)
    (layout.ws / "dirlink").symlink_to(layout.other.parent)
    result = await run_program(
        ["true"], cwd=layout.ws, allowed=ALLOWED, timeout=10, sandbox=sandbox
    )
    assert result.exit_code == 0
    after = layout.other.stat()
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )


# --------------------------------------------------------------------------------------------
# nothing outlives a command


async def test_a_timeout_kills_everything_the_command_started(
    sandbox: Sandbox, layout: Layout
) -> None:
    marker = f"timeout-{uuid.uuid4().hex}"
    result = await python(sandbox, layout.ws, spawner(marker), marker, timeout=1.5)
    assert result.timed_out
    assert "ready" in result.output
    assert await none_left(marker)


async def test_cancellation_kills_everything_the_command_started(
    sandbox: Sandbox, layout: Layout
) -> None:
    marker = f"cancel-{uuid.uuid4().hex}"
    task = asyncio.create_task(python(sandbox, layout.ws, spawner(marker), marker, timeout=60))
    for _ in range(200):
        if len(host_pids_with(marker)) >= 2:
            break
        await asyncio.sleep(0.05)
    assert len(host_pids_with(marker)) >= 2  # the command and its grandchild run
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await none_left(marker)


async def test_a_background_process_does_not_outlive_its_command(
    sandbox: Sandbox, layout: Layout
) -> None:
    marker = f"background-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
        f"'import time; time.sleep(60)', '{marker}'], start_new_session=True, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
    )
    result = await python(sandbox, layout.ws, code)
    assert result.exit_code == 0, result.output
    assert await none_left(marker)


async def test_a_signal_reads_as_a_signal(sandbox: Sandbox, layout: Layout) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    result = await python(sandbox, layout.ws, code)
    assert result.exit_code == -signal.SIGTERM
    assert Launch(argv=[], env={}, confined=True).exit_code(137) == -9
    assert Launch(argv=[], env={}, confined=True).exit_code(3) == 3
    assert Launch(argv=[], env={}, confined=False).exit_code(137) == 137


# --------------------------------------------------------------------------------------------
# modes


async def test_off_runs_unconfined_as_before(layout: Layout) -> None:
    off = Sandbox("off")
    assert await off.probe() == "off"
    result = await run_program(
        ["cat", str(layout.other)], cwd=layout.ws, allowed=ALLOWED, timeout=10, sandbox=off
    )
    assert SECRET in result.output
    uid = await run_program(["id", "-u"], cwd=layout.ws, allowed=ALLOWED, timeout=10, sandbox=off)
    assert uid.output.strip() == str(os.geteuid())
    assert "sandbox" not in command_tool(sandbox=off).description


async def test_bwrap_probes_as_available(sandbox: Sandbox) -> None:
    assert await sandbox.start() == "bwrap"
    assert sandbox.reason is None
    assert "bwrap" in sandbox.describe()
    assert "It runs in a sandbox" in command_tool(sandbox=sandbox).description


@pytest.fixture
def unavailable() -> Sandbox:
    return Sandbox("auto", bwrap="/nonexistent/bwrap")


async def test_without_a_sandbox_commands_are_refused_saying_how_to_enable_one(
    unavailable: Sandbox, layout: Layout
) -> None:
    assert await unavailable.start() == "unavailable"  # auto: the service starts anyway
    assert "/nonexistent/bwrap" in (unavailable.reason or "")
    with pytest.raises(ToolError) as refused:
        await run_program(
            ["echo", "hi"], cwd=layout.ws, allowed=ALLOWED, timeout=10, sandbox=unavailable
        )
    message = str(refused.value)
    for phrase in ("install bubblewrap", "user namespaces", "THREADLINE_SANDBOX=off", "file tools"):
        assert phrase in message
    ctx = ToolContext(workspace=layout.ws, idempotency_key="thread-a:call-1")
    result = await execute_tool(command_tool(sandbox=unavailable), ctx, {"command": ["echo", "x"]})
    assert not result.ok
    assert "install bubblewrap" in result.content


async def test_mode_bwrap_without_a_sandbox_fails_at_start_up() -> None:
    required = Sandbox("bwrap", bwrap="/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailable, match="THREADLINE_SANDBOX=bwrap"):
        await required.start()


async def test_verify_says_the_check_could_not_run(unavailable: Sandbox, tmp_path: Path) -> None:
    graph = build_graph(
        model=OfflineChatModel(),
        tools=default_tools(sandbox=unavailable),
        checkpointer=InMemorySaver(),
        data_dir=tmp_path,
        policy=ApprovalPolicy({"*": "auto"}),
        sandbox=unavailable,
    )
    config: Any = {"configurable": {"thread_id": "verify-unavailable"}}
    state = await graph.ainvoke({"task": {"name": "greet", "params": {"name": "Ada"}}}, config)
    assert state["status"] == "failed"  # not sent back to the agent: it cannot fix this
    assert state["verify_attempts"] == 1
    assert state["verdict"]["passed"] is False
    assert "install bubblewrap" in state["verdict"]["output"]


# --------------------------------------------------------------------------------------------
# a service that is not root (the Docker image runs as uid 1000)

SERVICE_UID = 1000
SANDBOX_MODULES = ("sandbox", "bwrap", "launch")
"""The modules of ``agent.tools`` the sandbox is made of (standard library only)."""
NON_ROOT_SCRIPT = """
import asyncio, json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from agent.tools import sandbox as sb
from agent.tools.launch import ResourceLimits
ws = sys.argv[2]
FORKS = '''
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError:
    print(n)
'''

async def main():
    box = sb.Sandbox('bwrap', limits=ResourceLimits(processes=16))
    out = {'uid': os.getuid(), 'status': await box.start()}
    for name, argv in [('id', ['/usr/bin/id', '-u']),
                       ('write', [sys.executable, '-c', "open('made.txt', 'w').write('x')"]),
                       ('forks', [sys.executable, '-c', FORKS])]:
        launch = await box.launch(argv, cwd=ws, env={'PATH': '/usr/bin:/bin'})
        proc = subprocess.run(launch.argv, pass_fds=launch.pass_fds, env=launch.env,
                              capture_output=True, text=True, timeout=30)
        launch.close()
        out[name] = [proc.returncode, proc.stdout.strip(), proc.stderr.strip()]
    print(json.dumps(out))

asyncio.run(main())
"""


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory another uid can reach (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="threadline-nonroot-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _system_python() -> str | None:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate):
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                capture_output=True,
                text=True,
            )
            if probe.stdout.strip() == "True":
                return candidate
    return None


async def test_a_service_that_is_not_root_gets_the_same_limits(shared_tmp: Path) -> None:
    system_python = _system_python()
    if os.geteuid() != 0 or system_python is None or shutil.which("setpriv") is None:
        pytest.skip("needs root (to become uid 1000), setpriv and a system Python 3.11+")
    # The sandbox's modules alone, in empty packages: the system Python has none of the rest.
    tools = shared_tmp / "lib" / "agent" / "tools"
    tools.mkdir(parents=True)
    for package in (tools.parent, tools):
        (package / "__init__.py").write_text("")
    for name in SANDBOX_MODULES:
        source = Path(sys.modules[f"agent.tools.{name}"].__file__ or "")
        shutil.copyfile(source, tools / f"{name}.py")
    for path in (shared_tmp / "lib").rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    (shared_tmp / "lib").chmod(0o755)
    ws = shared_tmp / "ws"
    ws.mkdir()
    os.chown(ws, SERVICE_UID, SERVICE_UID)
    proc = await asyncio.create_subprocess_exec(
        "setpriv",
        f"--reuid={SERVICE_UID}",
        f"--regid={SERVICE_UID}",
        "--clear-groups",
        system_python,
        "-c",
        NON_ROOT_SCRIPT,
        str(shared_tmp / "lib"),
        str(ws),
        cwd=shared_tmp,
        env={"PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["uid"] == SERVICE_UID
    assert report["status"] == "bwrap"
    assert report["id"][:2] == [0, str(SANDBOX_UID)]
    assert report["write"][0] == 0
    assert (ws / "made.txt").stat().st_uid == SERVICE_UID  # the service's own file
    assert report["forks"][0] == 0 and int(report["forks"][1]) < 16
