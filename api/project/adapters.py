"""How the service treats one served graph beyond LangGraph's own semantics.

Every assistant has a :class:`GraphAdapter`. The default one, which every graph from a
``langgraph.json`` gets, adds nothing: the graph runs as on LangGraph Server. The built-in agent's
(``api.builtin_agent``) checks its input, validates approval answers, records its tool calls in
the audit log and owns its workspaces. The rest of ``api/`` knows graphs only through this seam.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langgraph.types import Interrupt

from api.platform.errors import Invalid
from api.store.audit import PriorResult, ToolRecord


class RunHooks(Protocol):
    """What the worker offers a graph during one attempt of a run."""

    async def record_tool(self, record: ToolRecord) -> None:
        """Write an execution to the audit log (before its result can be checkpointed)."""

    async def prior_result(self, idempotency_key: str) -> PriorResult | None:
        """The recorded result of a call that already executed, if any."""


@dataclass(frozen=True)
class RunRequest:
    """A run about to be queued, as an adapter sees it."""

    thread_id: str
    input: Any
    command: dict[str, Any] | None
    config: dict[str, Any]
    thread: dict[str, Any] | None
    """The thread before the run (None: the run creates it). Its ``values`` are the last ones
    without their list-valued keys: a long conversation's messages are not read to check a
    run (the thread's state is ``pending``'s to read, or the graph's)."""
    pending: Callable[[], Awaitable[Sequence[Interrupt]]]
    """The thread's pending interrupts (read from its checkpoint when called)."""


class GraphAdapter:
    """The default: LangGraph Server's semantics, nothing added."""

    async def check_run(self, request: RunRequest) -> dict[str, Any]:
        """Refuse a run (raise ``api.platform.errors`` 4xx), or return the pending interrupts the
        new
        input closes: interrupt id -> the answer recorded for it."""
        return {}

    def check_answer(self, value: Any, answer: Any) -> None:
        """Validate the answer to an interrupt whose value is ``value``; ValueError says why."""

    def run_configurable(self, hooks: RunHooks) -> dict[str, Any]:
        """Entries for the run's ``config["configurable"]`` (the graph's hooks)."""
        return {}

    def recursion_limit(self) -> int | None:
        """The run's default ``recursion_limit`` (None: LangGraph's)."""
        return None

    def replayed_call(self, chunk: Any) -> str | None:
        """The tool call id a ``custom`` chunk says returned its recorded result instead of
        running again (the takeover dedupe then drops its repeated update)."""
        return None

    def thread_deleted(self, thread_id: str) -> None:
        """Remove what the graph keeps of a deleted thread outside the checkpointer."""

    def check_state_update(self, values: Any, as_node: str | None) -> str | None:
        """Refuse a client's ``POST /threads/{id}/state`` (raise ``api.platform.errors`` 4xx), or
        return
        the node to write it as (the default: ``as_node`` as sent, LangGraph's semantics)."""
        return as_node

    def thread_copied(self, source: str, target: str) -> None:
        """Copy what the graph keeps of thread ``source`` outside the checkpointer to ``target``
        (``POST /threads/{id}/copy``; the checkpoints are copied already)."""

    def describe(self) -> dict[str, Any]:
        """What ``/info`` shows of this graph's policy and environment."""
        return {}


DEFAULT = GraphAdapter()


def check_private_config(config: Mapping[str, Any] | None) -> None:
    """No client config key may start with ``__`` (the server's hooks, which adapters put in
    ``configurable``, and LangGraph's runtime keys) or ``langgraph_auth_`` (the caller, which the
    server sets). Applies to every graph."""
    config = config or {}
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, dict):
        raise Invalid("config.configurable must be an object")
    private = sorted(
        k
        for k in (*config, *configurable)
        if str(k).startswith("__") or str(k).startswith("langgraph_auth_")
    )
    if private:
        raise Invalid(
            f"config keys {private} are reserved for the server and LangGraph; remove them."
        )
