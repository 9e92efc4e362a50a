"""A run started while the transaction that creates it is still committing.

A plain new run is claimed at once by the process creating it (``api.run_create``), on an
existing thread or on one its transaction creates (``if_not_exists: create``): its graph starts
as the ``COMMIT`` goes out, and LangGraph sets up its loop during that round trip instead of
after it. Until the commit is known, the attempt writes
nothing and runs no node: its checkpointer (``api.saver``), its event log
(``api.store.event_writer``) and its lease's heartbeat (``api.worker``) wait at the gate. Only
``__start__`` runs before it, LangGraph's own step passing the input on; the step after it waits
for that step's checkpoint, which waits here. If the transaction fails, the attempt stops at the
gate (:class:`NotCommitted`) with nothing written, and the request gets the error as before
(a thread it was to create is not there either).
"""

from __future__ import annotations

import asyncio
from typing import Any

from api.store.events import LostRun

COMMIT_GATE_KEY = "__threadline_commit_gate"
"""In a run's dict and its ``config["configurable"]``: its :class:`CommitGate`."""


class NotCommitted(LostRun):
    """The run's transaction did not commit (or its outcome is unknown): the attempt stops."""


class CommitGate:
    """Open once the run's transaction committed; failed if it did not."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._done = asyncio.Event()
        self._failed = False

    @property
    def open(self) -> bool:
        return self._done.is_set() and not self._failed

    def committed(self) -> None:
        self._done.set()

    def failed(self) -> None:
        if not self._done.is_set():
            self._failed = True
            self._done.set()

    async def wait(self) -> None:
        """Return once committed; raise :class:`NotCommitted` if it failed."""
        if not self._done.is_set():
            await self._done.wait()
        if self._failed:
            raise NotCommitted(self.run_id)


async def passed(holder: dict[str, Any]) -> None:
    """Wait at the gate in ``holder`` (a run, or a config's ``configurable``), if it has one."""
    gate = holder.get(COMMIT_GATE_KEY)
    if gate is not None and not gate.open:
        await gate.wait()


async def landed(run: dict[str, Any]) -> bool:
    """Wait at ``run``'s gate, if any: whether its transaction committed."""
    try:
        await passed(run)
    except NotCommitted:
        return False
    return True


def gated(run: dict[str, Any]) -> dict[str, CommitGate]:
    """For a run's ``configurable``: its gate, if it has one (the checkpointer waits at it)."""
    gate = run.get(COMMIT_GATE_KEY)
    return {COMMIT_GATE_KEY: gate} if gate is not None else {}


def committed(run: dict[str, Any]) -> bool:
    """Whether ``run`` exists in the database (no gate, or an open one)."""
    gate = run.get(COMMIT_GATE_KEY)
    return gate is None or gate.open
