"""``multitask_strategy: rollback``: the new run removes the runs it cancelled.

The run create cancels the thread's active runs and names them in the new run's ``kwargs``
(``rollback``). The claim starts the new run only once they stopped (one run per thread, oldest
first), so when an attempt of the new run starts, they are finished: their checkpoints (saved
with their run id in the metadata), those checkpoints' writes, the runs and their events are
deleted in one transaction, before the new run reads the thread. Every attempt does it again,
which is idempotent: an attempt that died after it changed nothing more.
"""

from __future__ import annotations

import logging
from typing import Any

from api.platform.database import Pool
from api.store import runs
from api.store.checkpoint_tables import history

logger = logging.getLogger(__name__)


async def roll_back(pool: Pool, thread_id: str, run_ids: list[str]) -> None:
    async with pool.connection() as conn, conn.transaction():
        gone = await history.delete_of_runs(conn, thread_id, run_ids)
        removed = await runs.delete_finished(conn, thread_id, run_ids)
    if gone or removed:
        logger.info("thread %s: rolled back %d run(s), %d checkpoint(s)", thread_id, removed, gone)


def rolled_back(kwargs: dict[str, Any]) -> list[str]:
    found = kwargs.get("rollback")
    return [str(r) for r in found] if isinstance(found, list) else []
