"""The agents' tools. Each call appends lines to the ledger file named by
``DEEP_RESEARCH_LEDGER`` (when set), so a test can count what ran."""

from __future__ import annotations

import os
import time

from langchain.tools import tool


def record(line: str) -> None:
    ledger = os.environ.get("DEEP_RESEARCH_LEDGER")
    if ledger:
        with open(ledger, "a", encoding="utf-8") as file:
            file.write(line + "\n")


@tool
def search_sources(topic: str) -> str:
    """Search the library for sources on a topic (the researcher's tool)."""
    record(f"search-start {topic}")
    # A slow search, when asked to be one: a test stops the server in the middle of this call.
    time.sleep(float(os.environ.get("DEEP_RESEARCH_SEARCH_DELAY") or 0))
    record(f"search-done {topic}")
    return f"3 sources on {topic}: survey 2021, field study 2023, review 2024."


@tool
def publish_report(title: str, summary: str) -> str:
    """Publish a report for everyone to read. Needs a human's approval."""
    record(f"publish {title}")
    return f"Published {title!r}."
