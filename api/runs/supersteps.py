"""A new thread's starting state (``supersteps`` of ``POST /threads``, the SDK's
``threads.create(supersteps=..., graph_id=...)``): each superstep's updates applied with
``graph.bulk_update_state`` on the graph the thread's ``metadata.graph_id`` names, as LangGraph
Server does, and the thread's status, values and interrupts set from the state they leave."""

from __future__ import annotations

from typing import Any

from langgraph.errors import InvalidUpdateError
from langgraph.types import StateUpdate

from api.contract.threads import Superstep
from api.engine.run_context import run_input
from api.platform.errors import Conflict, Invalid
from api.project.adapters import DEFAULT
from api.runs.core import Core
from api.store import runs, threads


def graph_of(svc: Core, metadata: dict[str, Any], supersteps: list[Superstep]) -> Any:
    """The graph the supersteps are written to, each update checked as a state update of that
    graph is (its adapter may refuse it, or name the node it is written as): refused before
    the thread is created."""
    graph_id = metadata.get("graph_id")
    if not isinstance(graph_id, str):
        raise Invalid(
            "Invalid request: supersteps need the graph they are written to: put its id in "
            'metadata.graph_id (the SDK: threads.create(graph_id="...", supersteps=[...])).'
        )
    graph = svc.graph(graph_id)
    adapter = svc.runtime.adapter(graph_id)
    for step in supersteps:
        for update in step.updates:
            if update.command is not None and adapter is not DEFAULT:
                raise Invalid(
                    f"Invalid request: supersteps of {graph_id!r} write values, not commands: "
                    "its runs answer its interrupts."
                )
            if update.command is None:
                checked = adapter.check_state_update(update.values, update.as_node)
                update.as_node = checked or update.as_node
    return graph


def _updates(step: Superstep) -> list[StateUpdate]:
    out = []
    for u in step.updates:
        value: Any = run_input({"command": u.command.model_dump()}) if u.command else u.values
        out.append(StateUpdate(value, u.as_node))
    return out


async def apply_supersteps(
    svc: Core, graph: Any, thread_id: str, supersteps: list[Superstep]
) -> None:
    """Write the supersteps to the thread, under its lock (no run starts meanwhile)."""
    config = svc.thread_config(thread_id)
    async with svc.pool.connection() as conn, conn.transaction():
        if await runs.lock_thread(conn, thread_id):
            raise Conflict(f"Thread {thread_id!r} has an active run; its state was not set.")
        try:
            await graph.abulk_update_state(config, [_updates(s) for s in supersteps])
        except (InvalidUpdateError, ValueError, TypeError, KeyError) as err:
            raise Invalid(
                f"Invalid request: thread {thread_id!r} was created, but its supersteps were "
                f"refused: {err}"
            ) from None
        state = await graph.aget_state(config)
        await threads.refresh_from_state(conn, thread_id, state)
