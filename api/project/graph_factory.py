"""Graph factories as LangGraph Server calls them (``langgraph_api/_factory_utils.py``,
``graph.py`` ``get_graph``): a ``langgraph.json`` graph that names a function is called again
for each run, with that run's config (its assistant's merged under its own) and a
``ServerRuntime``, so one graph serves several models or prompts.

A factory takes no parameter, one (the config, or a ``runtime`` annotated ``ServerRuntime``), or
both (by keyword, in either order). It may be sync or async and may return a compiled graph, a
``StateGraph``, or a context manager (sync or async) that yields one: the run holds it open while
it runs and closes it after (MCP sessions, database connections).

Schemas, drawings and state reads use the graph the factory returned at start-up, called with
an empty config and ``access_context="assistants.read"``: as the SDK's ``ServerRuntime``
documents, a factory must return the same topology whatever it is called with.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langgraph_sdk.runtime import ServerRuntime

Hook = Callable[[dict[str, Any], Any], dict[str, Any]]
"""(config, runtime) → the factory's keyword arguments."""


class FactoryError(ValueError):
    """A factory whose parameters this server cannot fill; the message says which."""


@dataclass(frozen=True, kw_only=True)
class FactoryRuntime:
    """What a factory's ``runtime: ServerRuntime`` parameter gets: the fields and methods of
    ``langgraph_sdk.runtime.ServerRuntime`` (its classes are the SDK's own, not to construct)."""

    access_context: str
    store: Any = None
    user: Any = None
    context: Any = field(default=None)
    """The run's context; only when the graph is built to run (``threads.create_run``)."""

    @property
    def execution_runtime(self) -> FactoryRuntime | None:
        return self if self.access_context == "threads.create_run" else None

    def ensure_user(self) -> Any:
        if self.user is None:
            raise PermissionError(
                f"No authenticated user available in access_context={self.access_context!r}. "
                "Ensure custom auth is configured for the server."
            )
        return self.user


def _is_runtime(annotation: Any) -> bool:
    if annotation is ServerRuntime:
        return True
    origin = typing.get_origin(annotation)
    if origin is ServerRuntime:
        return True
    if origin is typing.Annotated:
        return _is_runtime(typing.get_args(annotation)[0])
    return isinstance(annotation, str) and annotation.split("[", 1)[0].endswith("ServerRuntime")


def factory_hook(fn: Callable[..., Any]) -> Hook:
    """How to call ``fn``: its parameters by annotation, as LangGraph Server classifies them."""
    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    runtime = [p.name for p in params if _is_runtime(hints.get(p.name, p.annotation))]
    if len(params) == 0:
        return lambda config, rt: {}
    if len(params) == 1:
        name = params[0].name
        return (lambda config, rt: {name: rt}) if runtime else (lambda config, rt: {name: config})
    if len(params) == 2 and len(runtime) == 1:
        other = next(p.name for p in params if p.name != runtime[0])
        return lambda config, rt: {runtime[0]: rt, other: config}
    raise FactoryError(
        f"graph factory {getattr(fn, '__qualname__', fn)!r} must take no parameter, a config, "
        "a runtime annotated ServerRuntime, or both; it takes "
        f"{[p.name for p in params]}"
    )


@dataclass(frozen=True)
class Factory:
    """A graph id's factory and how to call it."""

    fn: Callable[..., Any]
    hook: Hook

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Factory:
        return cls(fn, factory_hook(fn))

    @asynccontextmanager
    async def made(self, config: dict[str, Any], runtime: FactoryRuntime) -> AsyncIterator[Any]:
        """What the factory returns for ``config``, entered if it is a context manager."""
        made = self.fn(**self.hook(config, runtime))
        if inspect.isawaitable(made):
            made = await made
        if isinstance(made, AbstractAsyncContextManager):
            async with made as graph:
                yield graph
        elif isinstance(made, AbstractContextManager):
            with made as graph:
                yield graph
        else:
            yield made


def is_factory(obj: Any) -> bool:
    """A function (or other callable) that makes the graph, not the graph itself."""
    from langgraph.graph import StateGraph
    from langgraph.pregel import Pregel

    return callable(obj) and not isinstance(obj, StateGraph | Pregel)
