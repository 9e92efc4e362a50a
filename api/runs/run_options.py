"""Where a new run starts and where it pauses: the checkpoint it forks from, checked to be its
thread's (and, for a resume, the latest), and its breakpoints, checked against its graph."""

from __future__ import annotations

from typing import cast

from api.contract.runs import RunCreate
from api.platform.errors import Conflict, Invalid, NotFound
from api.runs.core import Core


def breakpoints(svc: Core, graph_id: str, body: RunCreate, key: str) -> list[str] | str | None:
    """``interrupt_before`` / ``interrupt_after``: ``"*"`` or nodes the graph has (422)."""
    nodes = getattr(body, key)
    if nodes is None or nodes == "*":
        return cast("str | None", nodes)
    known = [n for n in svc.graph(graph_id).nodes if n != "__start__"]
    unknown = sorted(set(nodes) - set(known))
    if unknown:
        raise Invalid(
            f"{key} names {unknown}, which graph {graph_id!r} does not have; "
            f'use its nodes ({", ".join(known)}) or "*"'
        )
    return list(dict.fromkeys(nodes))


async def start_checkpoint(
    svc: Core, thread_id: str, body: RunCreate, exists: bool
) -> dict[str, str] | None:
    """The checkpoint a run forks from (``checkpoint`` in the body), checked to be the thread's;
    None to continue from the latest. A resume answers what is pending now: it may name the
    latest checkpoint (as agent-chat-ui does), not an older one."""
    ref = body.checkpoint
    if ref is None:
        return None
    if ref.thread_id is not None and ref.thread_id != thread_id:
        raise Invalid(
            f"checkpoint.thread_id is {ref.thread_id!r}, not this thread ({thread_id!r}): a run "
            "starts from a checkpoint of its own thread (POST /threads/{id}/copy forks one)."
        )
    target = {"thread_id": thread_id, "checkpoint_ns": ref.checkpoint_ns}
    found = None
    if exists:
        found = await svc.runtime.saver.aget_tuple(
            {"configurable": {**target, "checkpoint_id": ref.checkpoint_id}}
        )
    if found is None:
        raise NotFound(
            f"No checkpoint {ref.checkpoint_id!r} on thread {thread_id!r}. "
            f"POST /threads/{thread_id}/history lists its checkpoints."
        )
    if body.command is None:
        return {"checkpoint_ns": ref.checkpoint_ns, "checkpoint_id": ref.checkpoint_id}
    latest = await svc.runtime.saver.aget_tuple({"configurable": target})
    if latest is not None and latest.checkpoint["id"] != ref.checkpoint_id:
        raise Conflict(
            f"A resume answers what is pending at the thread's latest checkpoint "
            f"({latest.checkpoint['id']}), not at {ref.checkpoint_id}: send that id or no "
            "checkpoint. To start over from an older one, send an input with its checkpoint."
        )
    return None
