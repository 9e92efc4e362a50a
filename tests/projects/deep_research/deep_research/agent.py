"""The graph ``langgraph.json`` serves: a deep agent with a sub-agent and an approval."""

from __future__ import annotations

from deepagents import create_deep_agent
from langchain_openai import ChatOpenAI

from deep_research.tools import publish_report, search_sources

# Built at import: the key and the endpoint come from the project's .env.
model = ChatOpenAI(model="gpt-4o-mini", temperature=0)

researcher = {
    "name": "researcher",
    "description": "Finds sources on a topic and summarises them.",
    "system_prompt": "You are the researcher. Search for sources, then summarise them.",
    "tools": [search_sources],
}

agent = create_deep_agent(
    model=model,
    tools=[publish_report],
    system_prompt="You are the research lead. Delegate searches, then publish a report.",
    subagents=[researcher],
    interrupt_on={"publish_report": True},
)
