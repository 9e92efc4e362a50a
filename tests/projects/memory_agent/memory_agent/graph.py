"""The memory-agent template's graph (langchain-ai/memory-agent): the model sees the user's
memories found by semantic search (``store.asearch(query=...)``) and saves new ones with a tool
whose calls ``store_memory`` carries out with the store (``store.aput``), then answers."""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from memory_agent.tools import upsert_memory

SYSTEM_PROMPT = """You are a helpful assistant that remembers what the user tells you.

<memories>
{user_info}
</memories>"""


@dataclass
class Context:
    user_id: str = "default"


# Built at import: the key and the endpoint come from the project's .env.
model = ChatOpenAI(model="gpt-4o-mini", temperature=0)
# The tool as the model sees it (the injected user_id and store hidden; the template binds the
# function itself, which today's langchain-core cannot describe: BaseStore has no JSON schema).
upsert_tool = StructuredTool.from_function(coroutine=upsert_memory)


async def call_model(state: MessagesState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer with the user's most relevant memories in the system prompt."""
    assert runtime.store is not None
    memories = await runtime.store.asearch(
        ("memories", runtime.context.user_id),
        query=str([m.content for m in state["messages"][-3:]]),
        limit=10,
    )
    formatted = "\n".join(f"[{m.key}]: {m.value} (similarity: {m.score})" for m in memories)
    system = SYSTEM_PROMPT.format(user_info=formatted)
    msg = await model.bind_tools([upsert_tool]).ainvoke(
        [{"role": "system", "content": system}, *state["messages"]]
    )
    return {"messages": [msg]}


async def store_memory(state: MessagesState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Carry out the model's upsert_memory calls."""
    assert runtime.store is not None
    tool_calls = getattr(state["messages"][-1], "tool_calls", [])
    # A memory's id comes from its tool call (the template draws a random one): a node that
    # runs again after a crash upserts the same memory instead of saving a second one.
    saved = await asyncio.gather(
        *(
            upsert_memory(
                **{"memory_id": uuid.uuid5(uuid.NAMESPACE_OID, tc["id"]), **tc["args"]},
                user_id=runtime.context.user_id,
                store=runtime.store,
            )
            for tc in tool_calls
        )
    )
    for line in saved:
        _ledger(line)
    while _held():  # noqa: ASYNC110 - a file the test removes: there is no event to wait on
        await asyncio.sleep(0.05)  # a test kills the server meanwhile
    return {
        "messages": [
            {"role": "tool", "content": mem, "tool_call_id": tc["id"]}
            for tc, mem in zip(tool_calls, saved, strict=True)
        ]
    }


def _held() -> bool:
    hold = os.environ.get("MEMORY_AGENT_HOLD")
    return bool(hold) and Path(hold).exists()


def _ledger(line: str) -> None:
    path = os.environ.get("MEMORY_AGENT_LEDGER")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def route_message(state: MessagesState) -> str:
    return "store_memory" if getattr(state["messages"][-1], "tool_calls", None) else END


builder = StateGraph(MessagesState, context_schema=Context)
builder.add_node(call_model)
builder.add_node(store_memory)
builder.add_edge(START, "call_model")
builder.add_conditional_edges("call_model", route_message, ["store_memory", END])
builder.add_edge("store_memory", "call_model")
graph = builder.compile()
graph.name = "MemoryAgent"
