"""A step's checkpoint, the task writes before it and the run's events before it, in one
statement; task writes on their own.

Sent as separate statements in one transaction (pipeline mode), a step of five parallel tasks
costs about a dozen statements: ``BEGIN``, the events, one per task write, one per changed
channel's blob, the checkpoint, ``COMMIT``. Each is a message PostgreSQL wakes up for and a
result this process waits for. Here they are one ``INSERT`` with data-modifying ``WITH``
clauses over JSON arrays of rows: one round trip, one implicit transaction, and the same rows
the stock saver's statements store (``langgraph.checkpoint.postgres.base``: the tables and their
conflict rules, which this module repeats; the rows, :mod:`.rows`).

The event log's fenced insert (``api.store.events.FENCED_EVENTS_CTE``) is part of it: the
checkpoint's row is selected from the fence, so an attempt that lost its run stores nothing of
the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from api.store.checkpoint_tables.rows import BlobRow, WriteRow
from api.store.events import FENCED_EVENTS_CTE, EventRows

WRITE_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob"
)
WRITE_KEY = "(thread_id, checkpoint_ns, checkpoint_id, task_id, idx)"

# Rows travel as one JSON array per table (psycopg adapts a parameter in Python, and an array
# per column costs a dozen of them per step where JSON costs one), their bytes beside it as one
# binary bytea[] (%(...)b), row n's at index n: a long thread's blob is a megabyte, and as base64
# inside JSON PostgreSQL took four times as long to store it (20 ms against 5 per megabyte here).
_WRITE_ROWS = """
    SELECT w.r->>0, w.r->>1, w.r->>2, w.r->>3, w.r->>4, (w.r->>5)::integer, w.r->>6, w.r->>7,
           (%({rows}_bytes)b::bytea[])[w.n]
    FROM json_array_elements(%({rows})s::json) WITH ORDINALITY AS w(r, n)"""

_INSERT_WRITES = f"""
    INSERT INTO checkpoint_writes ({WRITE_COLUMNS}){_WRITE_ROWS.format(rows="inserts")}
    ON CONFLICT {WRITE_KEY} DO NOTHING"""

_UPSERT_WRITES = f"""
    INSERT INTO checkpoint_writes ({WRITE_COLUMNS}){_WRITE_ROWS.format(rows="upserts")}
    ON CONFLICT {WRITE_KEY} DO UPDATE SET
        channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"""

_NO_EVENTS = """
fence AS (SELECT true),"""

_BODY = f"""
inserted AS ({_INSERT_WRITES}),
upserted AS ({_UPSERT_WRITES}),
blobs AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, %(checkpoint_ns)s, b.r->>0, b.r->>1, b.r->>2,
           (%(blobs_bytes)b::bytea[])[b.n]
    FROM json_array_elements(%(blobs)s::json) WITH ORDINALITY AS b(r, n)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING)"""


def _checkpoint_insert(prefix: str) -> str:
    return f"""
INSERT INTO checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT %(thread_id)s, %(checkpoint_ns)s, %({prefix}checkpoint_id)s, %({prefix}parent_id)s,
       %({prefix}checkpoint)s, %({prefix}metadata)s
FROM fence
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata"""


def _earlier(index: int) -> str:
    """Prefix of the parameters of a checkpoint held back to go with the step's
    (``api.durable.saver``): the oldest is ``earlier0_``."""
    return f"earlier{index}_"


_CHECKPOINT = _checkpoint_insert("")

_OWN = ("checkpoint_id", "parent_id", "checkpoint", "metadata")
"""Of a checkpoint's parameters, those that are not its thread's."""

WRITES_ONLY = f"WITH inserted AS ({_INSERT_WRITES}){_UPSERT_WRITES}"
"""Task writes no checkpoint took along (``api.durable.task_writes``)."""


@dataclass
class TaskWrite:
    """One task write and how the stock saver stores it: ``upsert`` (its special writes, which
    replace an earlier one) or insert (a repeat is ignored)."""

    row: WriteRow
    upsert: bool


def resolve_writes(writes: list[TaskWrite]) -> tuple[list[WriteRow], list[WriteRow]]:
    """The rows to insert and to upsert so that one statement stores what the writes, stored
    one by one in their order, would: an insert of a key already written is ignored, an upsert
    replaces it. (One ``INSERT … ON CONFLICT DO UPDATE`` may not touch a row twice.)"""
    final: dict[tuple[Any, ...], TaskWrite] = {}
    for write in writes:
        key = (*write.row[:4], write.row[5])
        if write.upsert or key not in final:
            final[key] = write
    inserts = [w.row for w in final.values() if not w.upsert]
    upserts = [w.row for w in final.values() if w.upsert]
    return inserts, upserts


def _rows(name: str, rows: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """The parameters of rows whose last column is bytes: ``name``, the other columns as a JSON
    array of arrays, and ``name_bytes``, the last column's values in the same order."""
    return {
        name: orjson.dumps([row[:-1] for row in rows]).decode(),
        f"{name}_bytes": [row[-1] for row in rows],
    }


def _write_params(writes: list[TaskWrite]) -> dict[str, Any]:
    inserts, upserts = resolve_writes(writes)
    return {**_rows("inserts", inserts), **_rows("upserts", upserts)}


def writes_statement(writes: list[TaskWrite]) -> tuple[str, dict[str, Any]]:
    """Task writes on their own, in one statement."""
    return WRITES_ONLY, _write_params(writes)


def step_statement(
    *,
    events: EventRows | None,
    writes: list[TaskWrite],
    blobs: list[BlobRow],
    checkpoint: dict[str, Any],
    earlier: Sequence[dict[str, Any]] = (),
) -> tuple[str, dict[str, Any]]:
    """The statement and its parameters. ``checkpoint`` holds ``thread_id``, ``checkpoint_ns``,
    ``checkpoint_id``, ``parent_id``, ``checkpoint`` and ``metadata`` (``Jsonb``:
    :func:`.rows.checkpoint_rows`); ``earlier``, the same of the checkpoints of its thread and
    namespace before it that were held back (their blobs are in ``blobs``), are stored in the
    same statement."""
    params = {
        **checkpoint,
        **_write_params(writes),
        **_rows("blobs", [row[2:] for row in blobs]),  # thread and namespace: the checkpoint's
    }
    sql = "WITH" + (_NO_EVENTS if events is None else FENCED_EVENTS_CTE) + _BODY
    if events is not None:
        params.update(events.params())
    for index, held in enumerate(earlier):
        prefix = _earlier(index)
        sql += f",\nearlier{index} AS ({_checkpoint_insert(prefix)})"
        params.update({prefix + k: v for k, v in held.items() if k in _OWN})
    return sql + _CHECKPOINT, params
