"""The worst case for the service: a graph whose nodes do no work, so only its own cost shows.

The shape of the built-in agent's runs (issue 17): ``agent`` sends five parallel ``tools`` tasks
(``Send``), then four more agent/tool rounds of one call each, then ``verify``:

    step  1  agent -> Send x5        step  7  agent -> Send x1
    step  2  tools x5 (parallel)     step  8  tools
    step  3  agent -> Send x1        step  9  agent -> Send x1
    step  4  tools                   step 10  tools
    step  5  agent -> Send x1        step 11  agent -> verify
    step  6  tools                   step 12  verify -> END

(LangGraph's step numbers: -1 is the input checkpoint, 0 the write of the input.)

``SUPERSTEPS`` (12) executed supersteps after the input checkpoint, ``EVENTS`` (19) chunks with
``stream_mode=["updates", "custom"]``: 16 updates (6 agent, 9 tool tasks, 1 verify) and 3 custom
events (the first agent step's plan, the last one's answer, verify's verdict). Nodes only return
state. Serve it from a ``langgraph.json`` as ``"./nowork.py:graph"`` (a ``StateGraph`` builder:
threadline and ``langgraph dev`` each compile it with their own checkpointer), or run
``builder().compile(checkpointer=...)`` directly.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

ROUNDS = (5, 1, 1, 1, 1)
"""Tool tasks the agent sends in each round; after the last round it hands over to ``verify``."""
SUPERSTEPS = 2 * len(ROUNDS) + 2
EVENTS = (len(ROUNDS) + 1) + sum(ROUNDS) + 1 + 3
GRAPH_ID = "nowork"
INPUT: dict[str, Any] = {"round": 0, "results": []}


class State(TypedDict, total=False):
    round: int
    results: Annotated[list[int], operator.add]
    passed: bool


class ToolCall(TypedDict):
    round: int
    index: int


def agent(state: State) -> State:
    r = state.get("round", 0)
    if r == 0:
        get_stream_writer()({"type": "plan", "tool_calls": ROUNDS[0]})
    elif r == len(ROUNDS):
        get_stream_writer()({"type": "answer", "results": len(state.get("results", []))})
    return {"round": r + 1}


def route(state: State) -> list[Send] | str:
    r = state.get("round", 0) - 1
    if r < len(ROUNDS):
        return [Send("tools", ToolCall(round=r, index=i)) for i in range(ROUNDS[r])]
    return "verify"


def tools(call: ToolCall) -> State:
    return {"results": [call["round"] * 10 + call["index"]]}


def verify(state: State) -> State:
    passed = len(state.get("results", [])) == sum(ROUNDS)
    get_stream_writer()({"type": "verify", "passed": passed})
    return {"passed": passed}


def builder() -> StateGraph[State]:
    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", tools)  # type: ignore[arg-type]  # a Send task takes its own payload
    g.add_node("verify", verify)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", "verify"])
    g.add_edge("tools", "agent")
    g.add_edge("verify", END)
    return g


graph = builder()
"""What a ``langgraph.json`` names: ``{"graphs": {"nowork": "./nowork.py:graph"}}``."""
