"""``build_graph``: the agent's StateGraph, compiled with the checkpointer it is given.

START  -> agent, or -> direct for a ``{"call": ...}`` input (one tool call without the model)
direct -> tools / review as a call of the agent; after it, tools -> END
agent  -> tools   one Send per tool call, each with its rule (auto, deny), or
       -> review  one Send with all the step's calls when any of them asks; no calls -> verify
review -> tools   one Send per call, the asked ones with their decisions (one interrupt for
                  the step's asking calls; the others wait for it, as in LangChain's
                  HumanInTheLoopMiddleware, so every call of a step runs in one superstep)
tools  -> agent   unless a guard stops the task (stuck, budget) -> verify
verify -> agent   when the check failed and attempts remain, else -> END
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy, Send

from agent.limits import Limits, guard_reason
from agent.nodes.agent_step import AgentStep
from agent.nodes.direct import DIRECT, direct_message, direct_node
from agent.nodes.review import ReviewNode, asks
from agent.nodes.tool_call import ToolCallNode
from agent.nodes.verify import VerifyNode
from agent.policy import ApprovalPolicy, Decision, validate_rules
from agent.state import AgentState, ReviewTask, ToolTask
from agent.tasks import TaskCatalog
from agent.tools import Sandbox, ToolSpec


def rule_calls(
    state: AgentState,
    config: RunnableConfig,
    *,
    policy: ApprovalPolicy,
    tools: dict[str, ToolSpec],
    tasks: TaskCatalog,
) -> list[ToolTask]:
    """One ``ToolTask`` per tool call of the last AI message, each with its rule decided now.

    The rule travels in the ``Send`` payload, which the checkpoint keeps: a run that resumes the
    call (its approval, a takeover after a crash) executes it under the rule it was made under,
    whatever that run's own config says. So does its place in the step: its ``position`` and, for
    a call that writes, the earlier writes it runs after.
    """
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    task_rules: dict[str, Decision] = {}
    refusal = None
    try:
        # A direct call is not the task's: the deployment's and the run's rules decide it.
        if last.name != DIRECT:
            task_rules = validate_rules(tasks.policy_for(state.get("task")))
        run_rules = validate_rules((config.get("configurable") or {}).get("approval_policy") or {})
    except ValueError as err:
        run_rules, refusal = {}, f"The call was not run: {err}."
    out: list[ToolTask] = []
    writes: list[str] = []
    for position, call in enumerate(last.tool_calls):
        tool = tools.get(call["name"])
        read_only = tool.read_only if tool else False
        ruling = policy.decide(
            call["name"], read_only=read_only, run_rules=run_rules, task_rules=task_rules
        )
        task = ToolTask(tool_call=call, ruling=ruling.as_dict(), position=position)
        if not read_only:  # writes run one at a time, in this order (agent.concurrency)
            task["after"] = list(writes)
            writes.append(str(call["id"]))
        if refusal:
            task["refusal"] = refusal
        out.append(task)
    return out


def build_graph(
    *,
    model: BaseChatModel,
    tools: Sequence[ToolSpec],
    checkpointer: BaseCheckpointSaver[Any] | None,
    data_dir: Path,
    policy: ApprovalPolicy | None = None,
    limits: Limits | None = None,
    tasks: TaskCatalog | None = None,
    sandbox: Sandbox | None = None,
    store: BaseStore | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build and compile the agent graph; no side effects until it runs.

    ``store``: long-term memory across threads (``get_store()`` in a node); the agent's own
    behaviour does not depend on it.

    ``sandbox`` confines the acceptance checks (default: ``agent.tools.default_sandbox()``);
    the tools bring their own (``default_tools(sandbox=...)``).
    """
    limits = limits or Limits()
    tool_list = list(tools)

    policy = policy or ApprovalPolicy()
    catalog = tasks or TaskCatalog()
    by_name = {t.name: t for t in tool_list}

    def route_after_agent(
        state: AgentState, config: RunnableConfig
    ) -> list[Send] | Literal["verify"]:
        """One ``tools`` task per tool call; no calls (or a stopped task) goes to ``verify``."""
        last = state["messages"][-1] if state.get("messages") else None
        if state.get("status") == "running" and isinstance(last, AIMessage) and last.tool_calls:
            calls = rule_calls(state, config, policy=policy, tools=by_name, tasks=catalog)
            if any(asks(c, by_name) for c in calls):
                review: ReviewTask = {"calls": calls}
                return [Send("review", review)]
            return [Send("tools", c) for c in calls]
        return "verify"

    def route_after_tools(state: AgentState) -> Literal["agent", "verify", "__end__"]:
        if direct_message(state) is not None:
            return "__end__"  # a direct call's run ends with its result
        return "verify" if guard_reason(state, limits) else "agent"

    def route_start(state: AgentState) -> Literal["direct", "agent"]:
        return "direct" if state.get("call") else "agent"

    def route_after_direct(state: AgentState, config: RunnableConfig) -> list[Send]:
        who = (config.get("configurable") or {}).get("langgraph_auth_user_id") or "anonymous"
        calls: list[ToolTask] = [
            {**c, "requested_by": str(who)}
            for c in rule_calls(state, config, policy=policy, tools=by_name, tasks=catalog)
        ]
        if any(asks(c, by_name) for c in calls):
            review: ReviewTask = {"calls": calls}
            return [Send("review", review)]
        return [Send("tools", c) for c in calls]

    def route_after_verify(state: AgentState) -> Literal["agent", "__end__"]:
        return "agent" if state.get("status") == "running" else "__end__"

    builder = StateGraph(AgentState)
    builder.add_node(
        "agent",
        AgentStep(model=model, tools=tool_list, data_dir=data_dir, limits=limits, tasks=catalog),
        retry_policy=RetryPolicy(max_attempts=3),
    )
    builder.add_node(
        "tools",
        ToolCallNode(tools=tool_list, policy=policy, data_dir=data_dir, limits=limits),
        input_schema=ToolTask,
    )  # type: ignore[call-overload]  # a callable instance, not a function
    builder.add_node(
        "review", ReviewNode(tools=tool_list), input_schema=ReviewTask, destinations=("tools",)
    )  # type: ignore[call-overload]
    builder.add_node(
        "verify", VerifyNode(data_dir=data_dir, limits=limits, tasks=catalog, sandbox=sandbox)
    )
    builder.add_node("direct", direct_node)
    builder.add_conditional_edges(START, route_start, ["direct", "agent"])
    builder.add_conditional_edges("direct", route_after_direct, ["tools", "review"])
    builder.add_conditional_edges("agent", route_after_agent, ["tools", "review", "verify"])
    builder.add_conditional_edges("tools", route_after_tools, ["agent", "verify", END])
    builder.add_conditional_edges("verify", route_after_verify, ["agent", END])
    return builder.compile(checkpointer=checkpointer, store=store, name="threadline-agent")
