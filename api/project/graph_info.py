"""What ``/assistants/{id}/graph``, ``/schemas`` and ``/subgraphs`` show of a compiled graph, as
LangGraph Server does: its drawable JSON and the JSON schemas of its input, output, state, config
and context. A schema that cannot be generated is null, never an error."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from langgraph.pregel import Pregel
from pydantic import create_model

from api.platform.serde import to_jsonable

logger = logging.getLogger(__name__)


def _safe(name: str, make: Callable[[], Any]) -> Any:
    try:
        return to_jsonable(make())
    except Exception as err:  # a graph's types may not have a JSON schema: null, and say why
        logger.info("no %s for this graph: %s", name, err)
        return None


def state_jsonschema(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    """The state's channels as one object schema (a channel whose type has no schema: any)."""
    fields: dict[str, Any] = {}
    for key in graph.stream_channels_list:
        channel = graph.channels[key]
        try:
            kind = getattr(channel, "UpdateType", Any)
            create_model(key, value=(kind, None)).model_json_schema()
            fields[key] = (kind, None)
        except Exception:
            fields[key] = (Any, None)
    model: Any = create_model(graph.get_name("State"), **fields)
    out: dict[str, Any] = model.model_json_schema()
    return out


def schemas(graph_id: str, graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    return {
        "graph_id": graph_id,
        "input_schema": _safe("input schema", graph.get_input_jsonschema),
        "output_schema": _safe("output schema", graph.get_output_jsonschema),
        "state_schema": _safe("state schema", lambda: state_jsonschema(graph)),
        "config_schema": _safe("config schema", graph.get_config_jsonschema),
        "context_schema": _safe("context schema", graph.get_context_jsonschema),
    }


def drawable(graph: Pregel[Any, Any, Any, Any], xray: bool | int) -> Any:
    """``graph.get_graph(xray=...).to_json()``; raises ValueError when it cannot be drawn."""
    try:
        return to_jsonable(graph.get_graph(xray=xray).to_json())
    except Exception as err:
        raise ValueError(str(err) or type(err).__name__) from None


def subgraphs(
    graph_id: str, graph: Pregel[Any, Any, Any, Any], namespace: str | None, recurse: bool
) -> dict[str, Any]:
    """Namespace → that subgraph's schemas (``Pregel.get_subgraphs``)."""
    return {
        ns: schemas(graph_id, cast(Pregel[Any, Any, Any, Any], sub))
        for ns, sub in graph.get_subgraphs(namespace=namespace, recurse=recurse)
    }


def parse_xray(raw: str | None) -> bool | int:
    """``xray`` as the SDKs send it: absent, true/false, or a depth (1 to 100)."""
    if raw is None or raw.lower() in ("false", "0", ""):
        return False
    if raw.lower() == "true":
        return True
    if raw.isdigit() and 1 <= int(raw) <= 100:
        return int(raw)
    raise ValueError(f"xray is true, false or a depth from 1 to 100, not {raw[:50]!r}")
