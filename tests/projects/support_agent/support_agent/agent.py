"""The graph ``langgraph.json`` serves: ``create_agent`` with a run context and approvals."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_openai import ChatOpenAI

from support_agent.context import Context
from support_agent.tools import lookup_order, refund

# Built at import: the key and the endpoint come from the project's .env.
model = ChatOpenAI(model="gpt-4o-mini", temperature=0)

agent = create_agent(
    model=model,
    tools=[lookup_order, refund],
    system_prompt="You are a support agent. Look orders up before you refund them.",
    context_schema=Context,
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"refund": True})],
)
