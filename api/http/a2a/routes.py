"""The A2A routes, for ``api.app`` to mount: JSON-RPC at ``/a2a/{assistant_id}`` (the SDK's
dispatcher, v1.0 and v0.3 method names, over :class:`~api.http.a2a.handler.Handler`) and the agent
card (``api.http.a2a.card``). Plain Starlette routes: outside the OpenAPI document."""

from __future__ import annotations

from a2a.server.routes import create_jsonrpc_routes
from starlette.routing import BaseRoute, Route

from api.http.a2a.card import card_response
from api.http.a2a.context import ContextBuilder
from api.http.a2a.handler import Handler

RPC_PATH = "/a2a/{assistant_id}"


def routes() -> list[BaseRoute]:
    rpc = create_jsonrpc_routes(
        Handler(), rpc_url=RPC_PATH, enable_v0_3_compat=True, context_builder=ContextBuilder()
    )
    for route in rpc:
        route.include_in_schema = False
    return [
        *rpc,
        Route(RPC_PATH, card_response, methods=["GET"], include_in_schema=False),
        Route(
            f"{RPC_PATH}/.well-known/agent-card.json",
            card_response,
            methods=["GET"],
            include_in_schema=False,
        ),
        Route(
            "/.well-known/agent-card.json",
            card_response,
            methods=["GET"],
            include_in_schema=False,
        ),
    ]
