"""The workers' tools. Each call appends lines to the ledger file named by
``SUPERVISOR_TEAM_LEDGER`` (when set), so a test can count what ran."""

from __future__ import annotations

import os
import time

from langchain.tools import tool

POPULATION = {"Lyon": (480_000, 522_000)}


def record(line: str) -> None:
    ledger = os.environ.get("SUPERVISOR_TEAM_LEDGER")
    if ledger:
        with open(ledger, "a", encoding="utf-8") as file:
            file.write(line + "\n")


@tool
def lookup_population(city: str) -> str:
    """The population of a city in 2010 and in 2020 (the researcher's tool)."""
    record(f"lookup-start {city}")
    # A slow registry, when asked to be one: a test stops the server in the middle of this call.
    time.sleep(float(os.environ.get("SUPERVISOR_TEAM_LOOKUP_DELAY") or 0))
    record(f"lookup-done {city}")
    then, now = POPULATION.get(city, (0, 0))
    return f"{city}: {then} in 2010, {now} in 2020."


@tool
def growth_rate(before: int, after: int) -> str:
    """The growth from ``before`` to ``after``, in percent (the analyst's tool)."""
    record(f"growth {before} {after}")
    return f"{(after - before) / before * 100:.1f}%"
