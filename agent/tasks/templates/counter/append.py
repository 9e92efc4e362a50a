"""Append one line to counter.txt after a delay, at most once per tool call.

Usage: python append.py LINE DELAY. THREADLINE_IDEMPOTENCY_KEY identifies the tool call: a call
that already appended does not append again. Every execution is logged in .counter-attempts as
"<key> applied|skipped <line>". The "applied" record is written (and synced) before the line, so
a call killed anywhere (a sandboxed command dies with a killed server) is, when it runs again,
either applied for the first time or completed: a recorded call whose line is missing appends it
then, and is logged as skipped.
"""

import fcntl
import os
import sys
import time


def append(path: str, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


line, delay = sys.argv[1], float(sys.argv[2])
key = os.environ.get("THREADLINE_IDEMPOTENCY_KEY", "")
time.sleep(delay)
with open(".counter.lock", "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        with open(".counter-attempts") as f:
            rows = [r.split() for r in f.read().splitlines()]
    except FileNotFoundError:
        rows = []
    done = {r[0] for r in rows if len(r) == 3 and r[1] == "applied"}
    outcome = "skipped" if key and key in done else "applied"
    if outcome == "applied":
        append(".counter-attempts", f"{key} applied {line}\n")
        append("counter.txt", line + "\n")
    else:
        try:
            with open("counter.txt") as f:
                present = line in f.read().split()
        except FileNotFoundError:
            present = False
        if not present:  # it was killed between its record and its line
            append("counter.txt", line + "\n")
        append(".counter-attempts", f"{key} skipped {line}\n")
print(f"line {line} {'appended' if outcome == 'applied' else 'was already appended by this call'}")
