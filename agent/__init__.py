"""The threadline agent: a LangGraph StateGraph with agent, tools and verify nodes. No HTTP here."""

from agent.graph import build_graph
from agent.limits import Limits
from agent.policy import ApprovalPolicy

__all__ = ["ApprovalPolicy", "Limits", "build_graph"]
