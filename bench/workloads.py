"""What a benchmark run runs: the built-in agent's ``counter`` task, or the no-work graph."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import nowork

GRAPHS = ("counter", "nowork")


@dataclass(frozen=True)
class Workload:
    name: str
    """``counter`` or ``nowork``."""
    assistant_id: str
    input: dict[str, Any] = field(hash=False)
    steps_per_run: int | None = None
    """Supersteps of a run when fixed (``nowork``); ``None``: counted from the agent's ``step``
    custom events (``counter``)."""

    @property
    def label(self) -> str:
        if self.name == "counter":
            params = self.input["task"]["params"]
            return f"`counter` n={params['n']} delay={params['delay']}"
        return (
            f"`nowork` ({nowork.SUPERSTEPS} supersteps, {nowork.EVENTS} events, "
            f"{'+'.join(str(r) for r in nowork.ROUNDS)} tool tasks)"
        )


def task_input(n: int, delay: float) -> dict[str, Any]:
    return {"task": {"name": "counter", "params": {"n": n, "delay": delay}}}


def make(name: str, n: int = 5, delay: float = 0.0) -> Workload:
    if name == "counter":
        return Workload("counter", "agent", task_input(n, delay))
    if name == "nowork":
        return Workload(nowork.GRAPH_ID, nowork.GRAPH_ID, dict(nowork.INPUT), nowork.SUPERSTEPS)
    raise ValueError(f"unknown graph {name!r}: one of {', '.join(GRAPHS)}")


def write_config(directory: Path) -> Path:
    """A ``langgraph.json`` serving the no-work graph, with a copy of ``bench/nowork.py`` beside
    it (self-contained: threadline and ``langgraph dev`` read the same file)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(nowork.__file__), directory / "nowork.py")
    config = directory / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "graphs": {nowork.GRAPH_ID: "./nowork.py:graph"},
                "env": {},
            },
            indent=1,
        )
    )
    return config
