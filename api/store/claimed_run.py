"""A run as a worker holds it: what one attempt needs, from its claim to its end.

Built once from the row of a claimed run (:meth:`ClaimedRun.from_row`): the claim statement's
(``api.store.runs.claim``) or the insert of a run claimed at once where it is created
(``api.store.run_insert``); both return ``runs.*``. Here, in the store, because that is what a
claim returns, and because the event writer (``api.durable``) takes it as well as the engine.
The API's view of a run is another thing (``api.store.rows.run_out``, ``api.contract.runs.Run``):
nothing of an attempt is answered to a client from this object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from api.store.claim_sql import saved_nothing


@dataclass(frozen=True)
class ClaimedRun:
    """One attempt of a run, held by the worker that claimed it."""

    run_id: str
    thread_id: str
    assistant_id: str
    graph_id: str
    """The graph it executes (an assistant's, or the one ``assistant_id`` names)."""
    attempt: int
    """This attempt's number: the lease, the event log and the checkpoints are fenced by it."""
    kwargs: dict[str, Any]
    """What the run was created with (input or command, config, context, stream modes, ...)."""
    created_at: datetime
    claimed_at: datetime
    """When this attempt was claimed (the claim sets ``updated_at`` to the database's ``now()``;
    a run claimed at once, where it is created, has its ``created_at``)."""
    stalled_attempts: int
    """Attempts in a row before this one that saved nothing (``api.store.claim_sql``)."""
    no_checkpoint: bool
    """The run's first attempt, and its thread had no checkpoint when it was claimed (read in the
    claim's statement): the checkpointer need not look (``api.durable.run_memory``). A later
    attempt reads the thread: the one before may have saved meanwhile."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ClaimedRun:
        """The attempt a ``runs`` row describes, as the claim (or the insert that claims a run
        at once) returned it: its ``progress`` is the thread's mark read by that statement."""
        attempt = int(row["attempt"])
        return cls(
            run_id=str(row["run_id"]),
            thread_id=str(row["thread_id"]),
            assistant_id=str(row["assistant_id"]),
            graph_id=str(row.get("graph_id") or row["assistant_id"]),
            attempt=attempt,
            kwargs=row["kwargs"],
            created_at=row["created_at"],
            claimed_at=row["updated_at"],
            stalled_attempts=int(row["stalled_attempts"]),
            no_checkpoint=attempt == 1 and saved_nothing(row["progress"]),
        )
