"""A three-step graph for checkpointer tests: ``fan``, then ``calls`` parallel ``work`` tasks
(one ``Send`` each, its payload ``{"i": i}``), then ``join``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import START, StateGraph
from langgraph.types import Send


def fan_out(
    state: type[Any],
    saver: Any,
    *,
    fan: Callable[..., Any],
    work: Callable[..., Any],
    join: Callable[..., Any],
    calls: int,
) -> Any:
    """The graph compiled on ``saver``; the nodes return their state updates."""

    def route(_: Any) -> list[Send]:
        return [Send("work", {"i": i}) for i in range(calls)]

    g = StateGraph(state)
    g.add_node("fan", fan)
    g.add_node("work", work)
    g.add_node("join", join)
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", route, ["work"])
    g.add_edge("work", "join")
    return g.compile(checkpointer=saver)
