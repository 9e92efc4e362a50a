"""What runs on the long thread (``bench/longthread.py``), on both sides: the chat graph
(``bench/chat.py``) with ``messages`` an ``add_messages`` list (``chat``) or a ``DeltaChannel``
(``chat_delta``), and the built-in agent (``agent``, ``bench/longthread_agent.py``); and what
their runs report through custom events (:class:`Tally`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from bench import chat, longthread_agent


@dataclass(frozen=True)
class Workload:
    """What runs on the long thread, on both sides."""

    name: str
    graph_id: str
    """The graph the server serves it as."""
    channel: str
    """How the graph stores ``messages``."""
    messages_per_run: int
    run_input: Callable[[int], dict[str, Any]]
    compile: Callable[[AsyncPostgresSaver, str, Path], tuple[Any, RunnableConfig]]
    """The floor's graph on a saver (url, data directory), and its run config's extras."""
    stream_modes: list[str] = field(default_factory=lambda: ["updates"])
    checked: bool = False
    """Each run ends with an acceptance check (a ``verify`` custom event) that must pass."""


def _chat(delta: bool) -> Callable[[AsyncPostgresSaver, str, Path], tuple[Any, RunnableConfig]]:
    return lambda saver, url, data_dir: (chat.builder(delta).compile(checkpointer=saver), {})


WORKLOADS = {
    "chat": Workload(
        "chat", chat.GRAPH_ID, "add_messages", chat.MESSAGES_PER_RUN, chat.run_input, _chat(False)
    ),
    "chat_delta": Workload(
        "chat_delta",
        chat.DELTA_GRAPH_ID,
        "DeltaChannel",
        chat.MESSAGES_PER_RUN,
        chat.run_input,
        _chat(True),
    ),
    "agent": Workload(
        "agent",
        longthread_agent.GRAPH_ID,
        "DeltaChannel",
        longthread_agent.MESSAGES_PER_RUN,
        longthread_agent.run_input,
        longthread_agent.compile_floor,
        longthread_agent.STREAM_MODES,
        checked=True,
    ),
}
GRAPHS = ("chat", "agent")
"""What ``--graph`` picks from (``both``: the two); ``--delta`` adds ``chat_delta``."""


def chosen(graph: str = "both", delta: bool = False) -> list[str]:
    """The workloads of a ``--graph`` choice, in the order they run."""
    names = list(GRAPHS) if graph == "both" else [graph]
    if delta:
        names.insert(names.index("chat") + 1 if "chat" in names else 0, "chat_delta")
    return names


class Tally:
    """What a workload's runs said through their custom events: acceptance checks passed (the
    last check of a run counts), context compactions."""

    def __init__(self) -> None:
        self.verified = self.compactions = 0
        self.passed: bool | None = None

    def custom(self, event: Any) -> None:
        if isinstance(event, dict):
            if event.get("type") == "verify":
                self.passed = bool(event.get("passed"))
            elif event.get("type") == "context_compacted":
                self.compactions += 1

    def end_run(self) -> None:
        self.verified += bool(self.passed)
        self.passed = None

    def as_dict(self, work: Workload) -> dict[str, Any]:
        """The counts, for a workload whose runs are checked (the chat graph sends no events)."""
        return (
            {"verified_runs": self.verified, "compactions": self.compactions}
            if work.checked
            else {}
        )
