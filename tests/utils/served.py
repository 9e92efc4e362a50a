"""A run's config as the service gives it to the checkpointer (``api.durable.saver``), without the
event log, and a graph with channels of every kind, for checkpointer tests."""

from __future__ import annotations

import operator
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from api.durable.run_memory import run_configurable
from api.durable.saver import PooledSaver
from tests.utils.fan_out import fan_out


class State(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    count: int
    label: str
    extra: dict[str, Any]


def channels_graph(saver: PooledSaver) -> Any:
    """Channels of every kind: a list (a blob), an int and a str (inline), a dict set late."""

    def fan(state: State) -> State:
        return {"count": 1, "label": "started", "notes": ["start"]}

    def work(call: dict[str, int]) -> State:
        return {"notes": [f"work {call['i']}"]}

    def join(state: State) -> State:
        return {"count": state.get("count", 0) + 1, "extra": {"done": True}, "label": "ended"}

    return fan_out(State, saver, fan=fan, work=work, join=join, calls=3)


class NoEvents:
    """A step's events when there are none (``api.durable.event_writer.CheckpointEvents``)."""

    def take(self) -> None:
        return None

    def stored(self) -> None:
        pass


@asynccontextmanager
async def barrier() -> AsyncIterator[NoEvents]:
    """A run's ``SaverRun.events``, with no events to take along."""
    yield NoEvents()


def served_config(thread_id: str, *, served: bool) -> Any:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if served:
        configurable.update(run_configurable(barrier))
    return {"configurable": configurable}


def one_node_graph(state: type[Any], saver: PooledSaver, node: Any) -> Any:
    """``START`` -> ``node`` -> ``END``, compiled on ``saver``."""
    g = StateGraph(state)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(checkpointer=saver)
