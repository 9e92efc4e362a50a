"""The ``direct`` node: a tool call asked for without the model (``{"call": {...}}`` input).

It writes the call as an AI message named :data:`DIRECT` with one tool call; the router then
decides its rule and sends it to ``review`` or ``tools`` as any call of the agent, and the run
ends after it (the model is not asked about its result).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from agent.state import AgentState

DIRECT = "direct_call"
"""The name of the AI message that carries a direct call."""


def direct_message(state: AgentState) -> AIMessage | None:
    """The last AI message if it carries a direct call."""
    for message in reversed(state.get("messages") or []):
        if isinstance(message, AIMessage):
            return message if message.name == DIRECT else None
    return None


async def direct_node(state: AgentState) -> dict[str, Any]:
    call = state.get("call") or {}
    call_id = call.get("id") or f"direct_{len(state.get('messages') or [])}_0"
    message = AIMessage(
        content="",
        name=DIRECT,
        tool_calls=[
            {
                "name": call["name"],
                "args": call.get("args") or {},
                "id": call_id,
                "type": "tool_call",
            }
        ],
    )
    return {"call": None, "messages": [message]}
