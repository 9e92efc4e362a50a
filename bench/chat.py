"""A chat graph whose nodes do no work, for long threads: every run adds its messages to one
``add_messages`` list, as a chat agent's runs do.

One run: the user's message, then ``agent`` → ``tools`` five times (an AI message with a tool
call, then its tool result) and a last ``agent`` answer: ``MESSAGES_PER_RUN`` (12) messages and
``SUPERSTEPS`` (11) supersteps. After 400 runs the thread holds 4,800 messages, and every
checkpoint of the stock ``messages`` channel stores all of them.

``delta_graph`` is the same graph with ``messages`` a ``DeltaChannel`` (LangGraph 1.2's beta):
a checkpoint stores the step's new messages, and a read replays them from the last snapshot;
how a graph opts in is this module's ``DeltaMessages``.

Serve it from a ``langgraph.json`` as ``"./chat.py:graph"`` or ``"./chat.py:delta_graph"``
(threadline and ``langgraph dev`` each compile it with their own checkpointer), or run
``builder(delta).compile(checkpointer=...)``.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, MessagesState, StateGraph

from agent.message_batches import add_messages_batch

GRAPH_ID = "chat"
DELTA_GRAPH_ID = "chat_delta"
ROUNDS = 5
MESSAGES_PER_RUN = 2 + 2 * ROUNDS
SUPERSTEPS = 2 * ROUNDS + 1


class DeltaMessages(TypedDict):
    """``MessagesState`` with its list stored as deltas: the one line a graph changes to opt in."""

    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch)]


def run_input(turn: int) -> dict[str, Any]:
    """The input of a thread's ``turn``-th run: one user message."""
    return {"messages": [{"role": "user", "content": f"turn {turn}: count the notes"}]}


def _calls(state: Any) -> int:
    """Tool calls the agent made since the user's last message."""
    made = 0
    for message in reversed(state["messages"]):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and message.tool_calls:
            made += 1
    return made


def agent(state: Any) -> dict[str, Any]:
    made = _calls(state)
    if made >= ROUNDS:
        return {"messages": [AIMessage(content=f"Done: {made} notes counted.")]}
    call = {"name": "count", "args": {"page": made}, "id": f"call_{uuid.uuid4().hex[:12]}"}
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def tools(state: Any) -> dict[str, Any]:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage) and last.tool_calls
    call = last.tool_calls[0]
    return {
        "messages": [
            ToolMessage(content=f"page {call['args']['page']}: 3 notes", tool_call_id=call["id"])
        ]
    }


def route(state: Any) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def builder(delta: bool = False) -> StateGraph[Any]:
    g: StateGraph[Any] = StateGraph(DeltaMessages if delta else MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g


graph = builder()
delta_graph = builder(delta=True)
