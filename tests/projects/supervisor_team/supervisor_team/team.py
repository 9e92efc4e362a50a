"""The graph ``langgraph.json`` serves: a supervisor and its two workers."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from langgraph_supervisor import create_supervisor

from supervisor_team.tools import growth_rate, lookup_population

# Built at import: the key and the endpoint come from the project's .env.
model = ChatOpenAI(model="gpt-4o-mini", temperature=0)

researcher = create_agent(
    model=model,
    tools=[lookup_population],
    system_prompt="You are the researcher. Look population figures up.",
    name="researcher",
)

analyst = create_react_agent(
    model=model,
    tools=[growth_rate],
    prompt="You are the analyst. Compute growth rates from the figures you are given.",
    name="analyst",
)

team = create_supervisor(
    [researcher, analyst],
    model=model,
    prompt="You are the team supervisor. Hand research to the researcher, maths to the analyst.",
).compile()
