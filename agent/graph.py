"""``build_graph``: the agent's StateGraph, compiled with the checkpointer it is given.

START -> agent
agent  -> tools   one Send per tool call, else -> verify
tools  -> agent   unless a guard stops the task (stuck, budget) -> verify
verify -> agent   when the check failed and attempts remain, else -> END
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import RetryPolicy, Send

from agent.limits import Limits, guard_reason
from agent.nodes.agent_step import AgentStep
from agent.nodes.tool_call import ToolCallNode
from agent.nodes.verify import VerifyNode
from agent.policy import ApprovalPolicy
from agent.state import AgentState, ToolTask
from agent.tools import ToolSpec


def route_after_agent(state: AgentState) -> list[Send] | Literal["verify"]:
    """One ``tools`` task per tool call; no calls (or a stopped task) goes to ``verify``."""
    last = state["messages"][-1] if state.get("messages") else None
    if state.get("status") == "running" and isinstance(last, AIMessage) and last.tool_calls:
        policy = dict((state.get("task") or {}).get("policy") or {})
        return [
            Send("tools", ToolTask(tool_call=call, task_policy=policy)) for call in last.tool_calls
        ]
    return "verify"


def build_graph(
    *,
    model: BaseChatModel,
    tools: Sequence[ToolSpec],
    checkpointer: BaseCheckpointSaver | None,
    data_dir: Path,
    policy: ApprovalPolicy | None = None,
    limits: Limits | None = None,
) -> CompiledStateGraph:
    """Build and compile the agent graph; no side effects until it runs."""
    limits = limits or Limits()
    tool_list = list(tools)

    def route_after_tools(state: AgentState) -> Literal["agent", "verify"]:
        return "verify" if guard_reason(state, limits) else "agent"

    def route_after_verify(state: AgentState) -> Literal["agent", "__end__"]:
        return "agent" if state.get("status") == "running" else "__end__"

    builder = StateGraph(AgentState)
    builder.add_node(
        "agent",
        AgentStep(model=model, tools=tool_list, data_dir=data_dir, limits=limits),
        retry_policy=RetryPolicy(max_attempts=3),
    )
    builder.add_node(
        "tools",
        ToolCallNode(
            tools=tool_list, policy=policy or ApprovalPolicy(), data_dir=data_dir, limits=limits
        ),
        input_schema=ToolTask,
    )  # type: ignore[call-overload]  # a callable instance, not a function
    builder.add_node("verify", VerifyNode(data_dir=data_dir, limits=limits))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route_after_agent, ["tools", "verify"])
    builder.add_conditional_edges("tools", route_after_tools, ["agent", "verify"])
    builder.add_conditional_edges("verify", route_after_verify, ["agent", END])
    return builder.compile(checkpointer=checkpointer, name="threadline-agent")
