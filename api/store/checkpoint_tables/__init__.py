"""LangGraph's checkpoint tables where threadline writes them itself: the one owner of what
those statements assume.

``langgraph-checkpoint-postgres`` creates and migrates four tables (``checkpoints``,
``checkpoint_blobs``, ``checkpoint_writes``, ``checkpoint_migrations``) and reads them back
(``AsyncPostgresSaver``). threadline writes them in statements of its own where the saver's
calls cost round trips every run waits for, or where it has no call:

- :mod:`.step`: a step's checkpoint with the task writes and the run's events before it, in one
  statement; task writes no checkpoint took along, on their own;
- :mod:`.history`: a thread's history as a whole: copied to a new thread, a rolled-back run's
  checkpoints deleted, threads deleted, compacted to its latest checkpoint.

Those statements repeat the stock saver's columns and conflict rules
(``langgraph.checkpoint.postgres.base``: ``UPSERT_CHECKPOINTS_SQL`` and the others) and store the
rows its ``aput`` and ``aput_writes`` would, serialized through the saver's public ``serde``
(:mod:`.rows`; ``tests/api/test_step_statement.py`` compares them row for row). Nothing else in
threadline writes these tables. The statements are written for the tables at
:data:`KNOWN_VERSION`: :func:`check_version`, run before the saver's ``setup()``
(``api.durable.saver.PooledSaver.setup``), refuses to start on any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from psycopg import AsyncConnection

KNOWN_VERSION = 9
"""The migration the statements here are written for: the last of ``langgraph-checkpoint-
postgres`` 3.2's ``MIGRATIONS`` (``task_path`` added to ``checkpoint_writes``). Its ``setup()``
numbers them from 0 and records each one it runs in ``checkpoint_migrations``."""

LIBRARY = "langgraph-checkpoint-postgres"


async def check_version(conn: AsyncConnection[Any], migrations: Sequence[str]) -> None:
    """Refuse to start (``RuntimeError``, one line saying what to do) when the installed saver
    would migrate the tables to another version than :data:`KNOWN_VERSION` (``migrations``: its
    ``MIGRATIONS``), or when they are past it already (a newer release migrated this database).
    A fresh database passes, and so do tables at an older version, which ``setup()`` migrates."""
    library = len(migrations) - 1
    if library != KNOWN_VERSION:
        raise RuntimeError(
            f"{LIBRARY} {version(LIBRARY)} migrates LangGraph's checkpoint tables to version "
            f"{library}, but threadline writes them for version {KNOWN_VERSION}: install "
            f"{LIBRARY} 3.2 (pip install '{LIBRARY}>=3.2,<3.3')"
        )
    cur = await conn.execute("SELECT to_regclass('checkpoint_migrations') IS NOT NULL AS made")
    made = await cur.fetchone()
    if made is None or not made["made"]:
        return
    cur = await conn.execute("SELECT max(v) AS v FROM checkpoint_migrations")
    row = await cur.fetchone()
    found = None if row is None else row["v"]
    if found is not None and found > KNOWN_VERSION:
        raise RuntimeError(
            f"LangGraph's checkpoint tables in this database are at migration version {found}, "
            f"but threadline writes them for version {KNOWN_VERSION}: a newer {LIBRARY} "
            "migrated them; start the threadline release that did, or restore a backup"
        )
