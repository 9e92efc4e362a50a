"""Graphs from a ``langgraph.json``-style file, re-bound to this service's checkpointer.

``{"graphs": {"my_graph": "./path/to/file.py:attr" | "package.module:attr"}}``. ``attr`` names a
compiled graph, a ``StateGraph`` builder, or a factory (sync or async, no arguments) returning
either. Paths are relative to the file.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore


class GraphConfigError(ValueError):
    """The config file or one of its graphs cannot be loaded; the message says which and why."""


def load_attr(spec: str, base: Path) -> Any:
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise GraphConfigError(f"graph {spec!r} must look like './file.py:attr' or 'module:attr'")
    if target.endswith(".py") or "/" in target:
        path = (base / target).resolve()
        if not path.is_file():
            raise GraphConfigError(f"graph file {path} does not exist")
        name = f"threadline_user_graph_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise GraphConfigError(f"cannot import {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise GraphConfigError(f"{target} has no attribute {attr!r}") from None


async def _resolve(
    obj: Any, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> Pregel[Any, Any, Any, Any]:
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer=saver, store=store)
    if isinstance(obj, Pregel):
        update: dict[str, Any] = {"checkpointer": saver}
        if store is not None:
            update["store"] = store
        return obj.copy(update=update)
    if callable(obj):
        made = obj()
        if inspect.isawaitable(made):
            made = await made
        if isinstance(made, StateGraph | Pregel):
            return await _resolve(made, saver, store)
    raise GraphConfigError(
        f"{obj!r} is not a compiled graph, a StateGraph, or a factory returning one"
    )


async def load_graphs(
    config_file: Path, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> dict[str, Pregel[Any, Any, Any, Any]]:
    """Every graph the file names, compiled with ``saver`` (and ``store``, long-term memory)."""
    try:
        data = json.loads(await asyncio.to_thread(config_file.read_text))
    except (OSError, json.JSONDecodeError) as err:
        raise GraphConfigError(f"cannot read graph config {config_file}: {err}") from None
    graphs = data.get("graphs") if isinstance(data, dict) else None
    if isinstance(data, dict) and (data.get("auth") or data.get("mcp_servers")) and not graphs:
        return {}  # a file that only configures auth or MCP servers: the built-in agent alone
    if not isinstance(graphs, dict) or not graphs:
        raise GraphConfigError(f"{config_file} needs a non-empty 'graphs' object")
    base = config_file.absolute().parent  # noqa: ASYNC240 - path arithmetic, no I/O
    out: dict[str, Pregel[Any, Any, Any, Any]] = {}
    for graph_id, spec in graphs.items():
        if isinstance(spec, dict):
            spec = spec.get("path", "")
        out[graph_id] = await _resolve(load_attr(str(spec), base), saver, store)
    return out
