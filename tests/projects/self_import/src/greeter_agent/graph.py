"""One node that greets; its greeting comes from the project's ``.env``."""

from __future__ import annotations

import os
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from greeter_agent import tools

# Read at import, as a graph that builds its model (and needs its key) at import does: without
# the project's .env loaded first, this module cannot be imported.
SIGNATURE = os.environ["GREETER_SIGNATURE"]


class State(TypedDict, total=False):
    name: str
    greeting: str
    signature: str


def greet(state: State) -> State:
    return {"greeting": tools.greet(state["name"]), "signature": SIGNATURE}


builder = StateGraph(State)
builder.add_node("greet", greet)
builder.add_edge(START, "greet")
builder.add_edge("greet", END)
graph = builder.compile()
