"""The built-in agent graph for in-process tests: compiled on a test runtime, its model scripted."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph

from agent import ApprovalPolicy, Limits, build_graph
from agent.tools import ToolSpec, default_tools
from api.engine.runtime import Runtime


def scripted_graph(
    runtime: Runtime,
    model: BaseChatModel,
    *,
    limits: Limits | None = None,
    tools: Sequence[ToolSpec] | None = None,
    policy: ApprovalPolicy | None = None,
) -> CompiledStateGraph:
    """The agent on ``runtime``'s checkpointer and data directory, answering with ``model`` (a
    ``ScriptedChatModel``, say); the default tools, policy and limits unless given."""
    return build_graph(
        model=model,
        tools=list(tools) if tools is not None else default_tools(),
        checkpointer=runtime.saver,
        data_dir=runtime.settings.data_dir,
        policy=policy,
        limits=limits,
    )
