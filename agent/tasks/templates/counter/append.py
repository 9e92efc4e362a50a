"""Append one line to counter.txt after a delay, at most once per tool call.

Usage: python append.py LINE DELAY. THREADLINE_IDEMPOTENCY_KEY identifies the tool call: a call
that already appended (say its process outlived a killed server) does not append again. Every
execution is logged in .counter-attempts as "<key> applied|skipped <line>".
"""

import fcntl
import os
import sys
import time

line, delay = sys.argv[1], float(sys.argv[2])
key = os.environ.get("THREADLINE_IDEMPOTENCY_KEY", "")
time.sleep(delay)
with open(".counter.lock", "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        with open(".counter-ledger") as f:
            done = set(f.read().split())
    except FileNotFoundError:
        done = set()
    outcome = "skipped" if key and key in done else "applied"
    if outcome == "applied":
        with open("counter.txt", "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        if key:
            with open(".counter-ledger", "a") as f:
                f.write(key + "\n")
                f.flush()
                os.fsync(f.fileno())
    with open(".counter-attempts", "a") as f:
        f.write(f"{key} {outcome} {line}\n")
print(f"line {line} {'appended' if outcome == 'applied' else 'was already appended by this call'}")
