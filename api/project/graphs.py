"""Graphs from a ``langgraph.json``-style file, re-bound to this service's checkpointer.

``{"graphs": {"my_graph": "./path/to/file.py:attr" | "package.module:attr"}}``. ``attr`` names a
compiled graph, a ``StateGraph`` builder, or a factory returning either, called again for each
run with its config (``api.project.graph_factory``). Paths are relative to the file. The project's
``env`` and ``dependencies`` are set up before any of this is imported
(``api.project.environment``).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from api.project.graph_factory import Factory, FactoryError, FactoryRuntime, is_factory


class GraphConfigError(ValueError):
    """The config file or one of its graphs cannot be loaded; the message says which and why."""


def load_attr(spec: str, base: Path) -> Any:
    """What ``spec`` (``./file.py:attr`` relative to ``base``, or ``module:attr``) names. A file
    is imported once per process, as a module would be: a second graph (or the auth) from the
    same file shares its objects."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise GraphConfigError(f"graph {spec!r} must look like './file.py:attr' or 'module:attr'")
    try:
        module = _import(target, base)
    except GraphConfigError:
        raise
    except Exception as err:  # the project's own code failed: say where, without a traceback
        raise GraphConfigError(import_failure(spec, base, err)) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise GraphConfigError(f"{target} has no attribute {attr!r}") from None


def _import(target: str, base: Path) -> Any:
    if not (target.endswith(".py") or "/" in target):
        return importlib.import_module(target)
    path = (base / target).resolve()
    if not path.is_file():
        raise GraphConfigError(f"graph file {path} does not exist")
    name = f"threadline_user_graph_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise GraphConfigError(f"cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]  # as a failed import does: not half a module for the next one
        raise
    return module


def import_failure(spec: str, base: Path, err: Exception) -> str:
    """One line on why importing ``spec`` failed: the error, the project's line that raised it
    and, for a missing module, how to make it importable."""
    message = f"importing {spec!r} failed: {type(err).__name__}: {err}"
    frames = [f for f in traceback.extract_tb(err.__traceback__) if _is_project_code(f.filename)]
    if frames:
        message += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    if isinstance(err, ModuleNotFoundError) and err.name:
        message += (
            f"; list the directory that holds {err.name.split('.')[0]!r} in the config's "
            f'"dependencies" (paths are relative to {base}), or install the package into '
            f"threadline's environment ({sys.prefix})"
        )
    return message


def _is_project_code(filename: str) -> bool:
    """Not this module, the import machinery, the standard library or an installed package."""
    if filename.startswith("<") or filename == __file__:
        return False
    installed = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return not any(Path(filename).is_relative_to(prefix) for prefix in installed)


def graph_specs(config_file: Path, data: Any) -> dict[str, str]:
    """The file's ``"graphs"``: graph id → ``path:attr``. A file that only configures auth or
    MCP servers has none (the built-in agent alone)."""
    graphs = data.get("graphs") if isinstance(data, dict) else None
    if isinstance(data, dict) and (data.get("auth") or data.get("mcp_servers")) and not graphs:
        return {}
    if not isinstance(graphs, dict) or not graphs:
        raise GraphConfigError(f"{config_file} needs a non-empty 'graphs' object")
    return {
        graph_id: str(spec.get("path", "") if isinstance(spec, dict) else spec)
        for graph_id, spec in graphs.items()
    }


def graph_descriptions(config_file: Path) -> dict[str, str]:
    """The ``description`` of each graph given as ``{"path": ..., "description": ...}``."""
    graphs = read_config(config_file).get("graphs") or {}
    return {
        graph_id: spec["description"]
        for graph_id, spec in graphs.items()
        if isinstance(spec, dict) and isinstance(spec.get("description"), str)
    }


def read_config(config_file: Path) -> Any:
    """The file's JSON, or a :class:`GraphConfigError` that says why not."""
    try:
        return json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GraphConfigError(f"cannot read graph config {config_file}: {err}") from None


def import_graphs(config_file: Path) -> dict[str, Any]:
    """What each graph of the file names, imported but not compiled: a project that cannot be
    imported fails here, before the server starts."""
    base = config_file.absolute().parent
    specs = graph_specs(config_file, read_config(config_file))
    found = {graph_id: load_attr(spec, base) for graph_id, spec in specs.items()}
    for graph_id, obj in found.items():
        if is_factory(obj):
            try:
                Factory.of(obj)  # parameters this server can fill
            except FactoryError as err:
                raise GraphConfigError(f"graph {graph_id!r}: {err}") from None
    return found


def bind(
    obj: Any, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> Pregel[Any, Any, Any, Any]:
    """A graph, compiled or rebound with this service's checkpointer and store."""
    if isinstance(obj, StateGraph):
        return obj.compile(checkpointer=saver, store=store)
    if isinstance(obj, Pregel):
        update: dict[str, Any] = {"checkpointer": saver}
        if store is not None:
            update["store"] = store
        return obj.copy(update=update)
    raise GraphConfigError(
        f"{obj!r} is not a compiled graph, a StateGraph, or a factory returning one"
    )


async def _resolve(
    graph_id: str, obj: Any, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> tuple[Pregel[Any, Any, Any, Any], Factory | None]:
    """The graph ``obj`` names, and its factory if it is made by one
    (``api.project.graph_factory``):
    called here as for schemas and state reads, with an empty config."""
    if not is_factory(obj):
        return bind(obj, saver, store), None
    try:
        factory = Factory.of(obj)
        reading = FactoryRuntime(access_context="assistants.read", store=store)
        async with factory.made({"configurable": {}}, reading) as made:
            return bind(made, saver, store), factory
    except GraphConfigError:
        raise
    except FactoryError as err:
        raise GraphConfigError(f"graph {graph_id!r}: {err}") from None
    except Exception as err:
        raise GraphConfigError(
            f"graph {graph_id!r}: its factory failed when called with an empty config (as it "
            f"is for schemas and state reads): {type(err).__name__}: {err}"
        ) from None


async def load_graphs(
    config_file: Path, saver: BaseCheckpointSaver[Any], store: BaseStore | None = None
) -> tuple[dict[str, Pregel[Any, Any, Any, Any]], dict[str, Factory]]:
    """Every graph the file names, compiled with ``saver`` (and ``store``, long-term memory),
    and the factories of those a factory makes."""
    data = await asyncio.to_thread(read_config, config_file)
    base = config_file.absolute().parent  # noqa: ASYNC240 - path arithmetic, no I/O
    graphs: dict[str, Pregel[Any, Any, Any, Any]] = {}
    factories: dict[str, Factory] = {}
    for graph_id, spec in graph_specs(config_file, data).items():
        graph, factory = await _resolve(graph_id, load_attr(spec, base), saver, store)
        graphs[graph_id] = graph
        if factory is not None:
            factories[graph_id] = factory
    return graphs, factories
