"""What an assistant gives a run, as LangGraph Server computes it: the default assistant's id, the
config and context an assistant keeps (each mirroring the other), and the run's own config and
context merged over the assistant's (``Runs.put`` in ``langgraph_runtime``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from api.platform.errors import ApiError

NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""LangGraph Server's namespace for the ids of the graphs' default assistants
(``langgraph_api.graph.NAMESPACE_GRAPH``)."""
SYSTEM_METADATA = {"created_by": "system"}
"""The metadata of a graph's default assistant, as LangGraph Server creates it."""


def default_assistant_id(graph_id: str) -> str:
    """The id of a served graph's default assistant: ``uuid5(NAMESPACE_GRAPH, graph_id)``."""
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


def default_name(graph_id: str, graph: Any) -> str:
    """The default assistant's name: the compiled graph's own name, unless it is LangGraph's
    placeholder (``"LangGraph"``), else the graph id (as LangGraph Server names it)."""
    name = getattr(graph, "name", None)
    return name if isinstance(name, str) and name and name != "LangGraph" else graph_id


@dataclass(frozen=True)
class RunAssistant:
    """The assistant a run is created with: what its run gets from it."""

    assistant_id: str
    graph_id: str
    config: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    loaded: bool = True
    """False: a served graph's default assistant named by its graph, not read yet (the run's
    transaction reads it with the thread, in the same round trip)."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunAssistant:
        return cls(str(row["assistant_id"]), row["graph_id"], row["config"], row["context"])

    @classmethod
    def of_graph(cls, graph_id: str) -> RunAssistant:
        return cls(default_assistant_id(graph_id), graph_id, loaded=False)


BOTH = (
    "Cannot specify both configurable and context. Prefer setting context alone: context "
    "(LangGraph 0.6 and later) replaces configurable for static values."
)


def in_sync(
    config: dict[str, Any], context: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """An assistant's ``config`` and ``context`` kept up to date with one another, as LangGraph
    Server stores them: a non-empty ``configurable`` is the context too, else a context given is
    the ``configurable`` too; both at once is a 400."""
    configurable = config.get("configurable") or {}
    if configurable and context:
        raise ApiError(BOTH)
    if configurable:
        return config, dict(configurable)
    if context:
        return {**config, "configurable": dict(context)}, context
    return config, context


def merged(
    assistant: RunAssistant, config: dict[str, Any] | None, context: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A run's ``(config, context)`` over its assistant's, run values winning: the config key by
    key at the top, its ``configurable`` key by key, the context key by key.

    As threadline stores a run's kwargs, ``context`` is set only when the caller sent one (the
    run's ``configurable`` is then mirrored from it, ``api.engine.run_context``), else the values
    go in ``configurable`` (mirrored into the context): either way the graph sees the same values in
    both, as on LangGraph Server, whose assistants keep the two in sync (:func:`in_sync`)."""
    base = dict(assistant.config)
    values = {**(assistant.context or {}), **(base.pop("configurable", None) or {})}
    out = {**base, **(config or {})}
    if context:  # the run's configurable is empty (api.engine.run_context refuses both)
        return out, {**values, **context}
    configurable = {**values, **((config or {}).get("configurable") or {})}
    if configurable:
        out["configurable"] = configurable
    return out, context
