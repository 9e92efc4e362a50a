"""The steps' side effects. Each step appends lines to the ledger file named by
``REVIEW_FLOW_LEDGER`` (when set), so a test can count what ran."""

from __future__ import annotations

import os
import time


def record(line: str) -> None:
    ledger = os.environ.get("REVIEW_FLOW_LEDGER")
    if ledger:
        with open(ledger, "a", encoding="utf-8") as file:
            file.write(line + "\n")


def write_draft(topic: str) -> str:
    record(f"draft-start {topic}")
    # A slow writer, when asked to be one: a test stops the server in the middle of this step.
    time.sleep(float(os.environ.get("REVIEW_FLOW_DRAFT_DELAY") or 0))
    record(f"draft-done {topic}")
    return f"A short note on {topic}."
