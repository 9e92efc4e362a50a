"""A new thread's starting state (``supersteps`` of ``POST /threads``, the SDK's
``threads.create(supersteps=..., graph_id=...)``): each superstep's updates applied with
``graph.bulk_update_state`` on the graph the thread's ``metadata.graph_id`` names, as LangGraph
Server does, and the thread's status, values and interrupts set from the state they leave."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph.errors import InvalidUpdateError
from langgraph.types import Command, StateUpdate

from api.errors import Conflict, Invalid
from api.store import runs, threads
from api.thread_schemas import Superstep

if TYPE_CHECKING:
    from api.service import Service


def graph_of(svc: Service, metadata: dict[str, Any]) -> Any:
    """The graph the supersteps are written to: refused before the thread is created."""
    graph_id = metadata.get("graph_id")
    if not isinstance(graph_id, str):
        raise Invalid(
            "Invalid request: supersteps need the graph they are written to: put its id in "
            'metadata.graph_id (the SDK: threads.create(graph_id="...", supersteps=[...])).'
        )
    return svc.graph(graph_id)


def _updates(step: Superstep) -> list[StateUpdate]:
    out = []
    for update in step.updates:
        if update.command is not None:
            c = update.command
            value: Any = Command(resume=c.resume, update=c.update, goto=c.goto or ())
        else:
            value = update.values
        out.append(StateUpdate(value, update.as_node))
    return out


async def apply_supersteps(
    svc: Service, graph: Any, thread_id: str, supersteps: list[Superstep]
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
