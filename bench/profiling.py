"""Sampling a process with ``py-spy record`` and summarizing where its CPU time went."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
SITE = re.compile(r"(?:site|dist)-packages/(?P<pkg>[^/]+)/")
GROUPS = {
    "psycopg_pool": "psycopg",
    "psycopg_binary": "psycopg",
    "fastapi": "starlette/fastapi",
    "starlette": "starlette/fastapi",
    "anyio": "starlette/fastapi",
    "h11": "uvicorn",
    "httptools": "uvicorn",
    "pydantic_core": "pydantic",
    "ormsgpack": "langgraph",
}
IDLE_LEAVES = {
    # Blocking waits py-spy --nonblocking can report as active: not CPU, left out of the shares.
    "Condition.wait",
    "Event.wait",
    "_worker",  # a thread-pool thread in work_queue.get()
    "Thread._wait_for_tstate_lock",
    "Thread.join",
    "EpollSelector.select",
    "select",
}
LOOP_ENTRIES = {
    "Runner.run",
    "run_until_complete",
    "run_forever",
    "BaseEventLoop.run_forever",
    "BaseEventLoop.run_until_complete",
}


def component(file: str) -> str | None:
    """The package a frame's file belongs to; ``None`` for the standard library."""
    m = SITE.search(file)
    if m:
        pkg = m["pkg"]
        return GROUPS.get(pkg, pkg)
    if file.startswith("<") or re.search(r"/lib/python3\.\d+/", file):
        return None
    for project in ("api", "agent", "bench"):
        if f"/{project}/" in file:
            return "threadline " + project
    return "other"


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return found if Path(found).exists() else None


class Recorder:
    """``py-spy record --format raw`` on a pid until :meth:`stop` (SIGINT makes it write)."""

    def __init__(self, pid: int, out: Path, rate: int = 100) -> None:
        exe = py_spy()
        if exe is None:
            raise RuntimeError("py-spy is not installed (pip install py-spy)")
        self.out = out
        self.log = out.with_suffix(".log")
        cmd = [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw"]
        cmd += ["--output", str(out), "--nonblocking", "--full-filenames"]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def stop(self) -> Path:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.out


def _frame(text: str) -> tuple[str, str]:
    """(``function (short file)``, full file) for one py-spy frame."""
    m = FRAME.match(text.strip())
    if not m:
        return text.strip(), ""
    file = m["file"]
    short = re.sub(r"^.*?(?:site-packages|dist-packages|lib/python3\.\d+)/", "", file)
    short = re.sub(r"^.*?/work/main/", "", short)
    return f"{m['func']} ({short})", file


def _task_start(parsed: list[tuple[str, str]]) -> int:
    """Index of the first frame inside the running task: frames above the event loop's entry
    are the process's ``main`` and would be in every sample."""
    start = 0
    for i, (name, _) in enumerate(parsed):
        if name.split(" (")[0] in LOOP_ENTRIES:
            start = i + 1
    return start


def _owner(parsed: list[tuple[str, str]]) -> str:
    """Which component a sample's CPU belongs to: the innermost frame outside the stdlib, inside
    the running task; none there means the event loop itself or an idle-ish worker thread."""
    for _, file in reversed(parsed[_task_start(parsed) :]):
        found = component(file)
        if found is not None:
            return found
    if parsed and parsed[0][0].startswith("Thread._bootstrap"):
        return "(worker threads: wake-up, queue)"
    return "(event loop: uvloop/asyncio, polling, callbacks)"


def _db_site(parsed: list[tuple[str, str]]) -> str:
    """Who a psycopg sample works for: the innermost caller outside psycopg and the stdlib,
    marked when the time is the pool's per-checkout connection check."""
    check = any("check_connection" in name for name, _ in parsed)
    site = "(no caller on the stack: a resumed coroutine)"
    for name, file in reversed(parsed):
        found = component(file)
        if found not in (None, "psycopg"):
            site = name
            break
    return f"pool check <- {site}" if check else site


def summarize(path: Path, top: int = 15) -> dict[str, Any]:
    """Self and inclusive sample shares per function, and the share of each component."""
    self_c: Counter[str] = Counter()
    incl_c: Counter[str] = Counter()
    comp_c: Counter[str] = Counter()
    db_c: Counter[str] = Counter()
    total = idle = 0
    if not path.exists():
        return {"samples": 0, "error": f"{path} was not written"}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        # py-spy raw: "outer;...;leaf count"; entries without "(file)" are headers.
        frames = [f for f in stack.split(";") if f.rstrip().endswith(")") and "(" in f]
        if not frames:
            continue
        parsed = [_frame(f) for f in frames]
        if parsed[-1][0].split(" (")[0] in IDLE_LEAVES:
            idle += n
            continue
        total += n
        self_c[parsed[-1][0]] += n
        owner = _owner(parsed)
        comp_c[owner] += n
        if owner == "psycopg":
            db_c[_db_site(parsed)] += n
        for name in {p[0] for p in parsed[_task_start(parsed) :]}:
            incl_c[name] += n

    def share(c: Counter[str], k: int) -> list[dict[str, Any]]:
        return [
            {"name": name, "samples": v, "pct": round(100 * v / total, 1)}
            for name, v in c.most_common(k)
        ]

    return {
        "samples": total,
        "idle_samples_left_out": idle,
        "self": share(self_c, top),
        "inclusive": share(incl_c, top + 10),
        "components": share(comp_c, 20),
        "psycopg_by_caller": share(db_c, 12),
    }
