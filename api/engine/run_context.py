"""A run's ``context`` (LangGraph's ``Runtime.context``), as LangGraph Server gives it to a graph.

A run names its static context in ``context`` (LangGraph 0.6 and later) or, as before, in
``config["configurable"]``; not both (400, as LangGraph Server answers). Either one is mirrored
into the other: a graph reading ``runtime.context`` and one reading ``config["configurable"]``
see the same values. A graph with a ``context_schema`` gets only the keys its schema names (the
others are dropped from the mirror too when the caller sent ``context``), as a dict that
LangGraph turns into the schema's type; its required fields must be there, or the run fails in
its first step, as on LangGraph Server.
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.types import Command

from api.platform.errors import ApiError

logger = logging.getLogger(__name__)


def check_context(context: dict[str, Any] | None, config: dict[str, Any] | None) -> None:
    """Refuse a run that sends both ``context`` and a non-empty ``configurable``."""
    if context and ((config or {}).get("configurable") or {}):
        raise ApiError(
            "Cannot specify both configurable and context. Prefer setting context alone: "
            "context (LangGraph 0.6 and later) replaces configurable for a run's static values."
        )


def effective_config(
    config: dict[str, Any] | None, context: dict[str, Any] | None
) -> dict[str, Any]:
    """A run's config as its graph sees it: with ``context`` sent, its ``configurable`` is the
    context (mirrored, see :func:`run_context`). Every check of a run's config (reserved keys,
    the built-in agent's ``approval_policy``) reads this one, so a value cannot go around a
    check by coming in as context."""
    effective = dict(config or {})
    if context:
        effective["configurable"] = dict(context)
    return effective


def run_context(graph: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(context, configurable)`` of a run: what ``astream(context=...)`` gets, and the
    caller's part of ``config["configurable"]``."""
    configurable = dict((kwargs.get("config") or {}).get("configurable") or {})
    given = kwargs.get("context")
    if given:
        context = dict(given)
        configurable = dict(given)
    else:
        context = dict(configurable)
    kept = _schema_keys(graph)
    if kept is not None:
        dropped = context.keys() - kept
        for key in dropped:
            if given and configurable.get(key) == context[key]:
                configurable.pop(key, None)
            context.pop(key)
    return context, configurable


def _schema_keys(graph: Any) -> set[str] | None:
    """The keys the graph's context schema names; None when it has none (all are kept)."""
    if getattr(graph, "context_schema", None) is None:
        return None
    try:
        schema = graph.get_context_jsonschema()
    except Exception:  # a schema LangGraph cannot describe: keep everything
        logger.debug("no JSON schema for the context of %r", graph, exc_info=True)
        return None
    properties = (schema or {}).get("properties")
    return set(properties) if properties else None


def run_input(kwargs: dict[str, Any]) -> Any:
    """What the graph is streamed with: the run's ``command`` (a resume), else its input."""
    command = kwargs.get("command")
    if command:
        return Command(
            resume=command.get("resume"),
            update=command.get("update"),
            goto=command.get("goto") or (),
        )
    return kwargs.get("input")
