"""The agent card of an assistant, as LangGraph Server serves it: at
``/.well-known/agent-card.json?assistant_id=ID``, ``/a2a/{id}/.well-known/agent-card.json`` and
``GET /a2a/{id}``; one skill (the assistant itself), JSON-RPC at ``/a2a/{id}``, streaming, and
push notifications unless the server refuses webhooks. Guarded like every route (credentials
when authentication is on); an assistant the caller cannot see is a 404."""

from __future__ import annotations

from importlib.metadata import version

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from api.platform.errors import ApiError
from api.runs import assistant_access
from api.runs.service import Service

MODES = ["text/plain", "application/json"]


async def build(svc: Service, assistant_id: str, base_url: str) -> AgentCard:
    """The card (404 for an assistant the caller cannot see)."""
    row = await assistant_access.find(svc, assistant_id)
    name = str(row["name"])
    description = row.get("description") or f"{name} assistant"
    url = f"{base_url.rstrip('/')}/a2a/{assistant_id}"
    return AgentCard(
        name=name,
        description=description,
        # The endpoint serves v0.3's method names too: v0.3 clients read the card's ``url``,
        # which the SDK writes for a card that names a 0.3 interface.
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        version=version("threadline"),
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=svc.webhooks, extended_agent_card=False
        ),
        default_input_modes=MODES,
        default_output_modes=MODES,
        skills=[
            AgentSkill(
                id=f"{assistant_id}-main",
                name=f"{name} Capabilities",
                description=description,
                tags=["assistant", "langgraph"],
                input_modes=MODES,
                output_modes=MODES,
            )
        ],
    )


async def card_response(request: Request) -> Response:
    """The card of the path's assistant, or of ``?assistant_id=``."""
    assistant_id = request.path_params.get("assistant_id") or request.query_params.get(
        "assistant_id"
    )
    if not assistant_id:
        return JSONResponse(
            {
                "detail": "Name the assistant: /.well-known/agent-card.json?assistant_id=<id> "
                "(an assistant's id, or a served graph's name)."
            },
            400,
        )
    try:
        card = await build(request.app.state.service, assistant_id, str(request.base_url))
    except ApiError as err:
        return JSONResponse({"detail": err.message}, err.status)
    return JSONResponse(agent_card_to_dict(card))
