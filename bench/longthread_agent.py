"""The built-in agent as a long-thread workload (``bench/longthread.py``, graph id ``agent``).

Every run is one task on the same thread: the ``counter`` demo task (``n`` = 5, no delay), which
the offline model plays without a network. A ``{"task": ...}`` input on a thread that finished
a task starts a new one (``agent.nodes.agent_step``: the task's instruction is added as a human
message, usage and verdict reset, the task's template copied into the thread's workspace again,
so ``counter.txt`` starts empty), and its messages go on the thread's one ``messages`` list, a
``DeltaChannel`` (``agent/state.py``). A run: the instruction, four agent steps with the 5 tool
calls (real subprocesses, ``python append.py``) and their 5 results, the answer: 11 messages,
then the acceptance check (a subprocess too), which must pass.

The agent runs as it is deployed, with its default context budget (27,904 estimated tokens for
the offline model; a run adds about 390): once a model call would pass 80 % of it, at the 55th
run, a step compacts older turns into one summary message (``agent.context``), and again about
every 22 runs after, so the thread's list stays between about 330 and 550 messages while its
checkpoints keep adding up. The result counts the compactions and the messages at the end.

The floor is the same graph that ``bench/direct.py`` runs (``api.builtin_agent.wiring.
build_agent`` with the environment's ``AgentSettings``), compiled on LangGraph's stock
``AsyncPostgresSaver`` in the benchmark's process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from agent.settings import AgentSettings
from agent.tasks.counter import groups
from api.builtin_agent.wiring import build_agent
from api.platform.settings import Settings
from bench.workloads import task_input

GRAPH_ID = "agent"
N = 5
"""Lines each run's ``counter`` task appends."""
MESSAGES_PER_RUN = 2 + len(groups(N)) + N
"""The instruction, one AI message per step with calls, one tool message per line, the answer."""
STREAM_MODES = ["updates", "custom"]
"""What the agent's clients ask for: its progress (``step``, ``verify``...) is custom events."""


def run_input(turn: int) -> dict[str, Any]:
    """Every run's input: a new ``counter`` task on the thread."""
    return task_input(N, 0.0)


def compile_floor(
    saver: AsyncPostgresSaver, url: str, data_dir: Path
) -> tuple[Any, RunnableConfig]:
    """The built-in agent on ``saver``, and the config a run needs beside its thread id."""
    agent = AgentSettings()
    settings = Settings(database_url=url, data_dir=data_dir)
    graph = build_agent(settings, agent, saver)  # type: ignore[arg-type]  # the stock saver
    return graph, {"recursion_limit": agent.limits.recursion_limit()}
