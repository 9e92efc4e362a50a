"""The rows of LangGraph's checkpoint tables as ``AsyncPostgresSaver`` builds them, serialized
through the saver's public ``serde``: what :mod:`.step` and :mod:`.history` store.

The stock saver builds them in helpers it keeps to itself; these repeat them (they are short),
so nothing here depends on a name the library may change in a patch release.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg.types.json import Jsonb

from api.platform.jsonb import storable_text

WriteRow = tuple[str, str, str, str, str, int, str, str, bytes]
"""A row of ``checkpoint_writes``: thread, namespace, checkpoint, task id, task path, index,
channel, and the value's type and bytes."""

BlobRow = tuple[str, str, str, str, str, bytes | None]
"""A row of ``checkpoint_blobs``: thread, namespace, channel, version, and the value's type and
bytes (``"empty"`` and none: the channel had no value at that version)."""


def write_rows(
    serde: SerializerProtocol,
    config: RunnableConfig,
    task_id: str,
    task_path: str,
    writes: Sequence[tuple[str, Any]],
) -> list[WriteRow]:
    """A task's writes as ``aput_writes`` stores them, on the checkpoint ``config`` names: a
    special write (error, interrupt, ...) at its fixed index (``WRITES_IDX_MAP``), the others
    at their position."""
    c = config["configurable"]
    return [
        (
            c["thread_id"],
            c["checkpoint_ns"],
            c["checkpoint_id"],
            task_id,
            task_path,
            WRITES_IDX_MAP.get(channel, idx),
            channel,
            *serde.dumps_typed(value),
        )
        for idx, (channel, value) in enumerate(writes)
    ]


def blob_rows(
    serde: SerializerProtocol,
    thread_id: str,
    checkpoint_ns: str,
    values: Mapping[str, Any],
    versions: ChannelVersions,
) -> list[BlobRow]:
    """The blobs of the channels at ``versions``: each one's value in ``values``, or empty."""
    return [
        (
            thread_id,
            checkpoint_ns,
            channel,
            str(ver),
            *(serde.dumps_typed(values[channel]) if channel in values else ("empty", None)),
        )
        for channel, ver in versions.items()
    ]


_DELTA: DeltaChannel[Any] = DeltaChannel(lambda value, writes: value)


def is_delta_snapshot(value: Any) -> bool:
    """Whether ``value``, in a checkpoint's ``channel_values``, is a ``DeltaChannel``'s snapshot
    (LangGraph exports no name for its type): the one value such a channel restores itself from
    rather than as (``DeltaChannel.from_checkpoint``). A snapshot is a named tuple, so only
    tuples are asked (``tests/api/test_checkpoint_tables.py`` holds LangGraph to both)."""
    return isinstance(value, tuple) and _DELTA.from_checkpoint(value).get() is not value


def jsonb(value: Any) -> bytes:
    """JSON for a ``jsonb`` column: orjson, or the standard library's for what orjson refuses
    (keys that are not strings, integers beyond 64 bits), as the stock saver writes them, with
    a NUL in a string (which ``jsonb`` refuses; the stock saver drops it) as U+FFFD."""
    try:
        return storable_text(orjson.dumps(value))
    except TypeError:
        return storable_text(json.dumps(value).encode())


def checkpoint_rows(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> tuple[dict[str, Any], list[BlobRow], RunnableConfig]:
    """What the stock ``aput`` stores for a checkpoint: its row (primitive channel values
    inline, the others moved to blobs, a delta channel's snapshot marked ``true`` inline), the
    blobs of the channels it changed, and the config naming it. The blobs are serialized here,
    not in a thread: the stock saver's hop to one costs more than a step's few small values.

    The row's keys are the step statement's parameters (:func:`.step.step_statement`)."""
    configurable = config["configurable"]
    thread_id = configurable["thread_id"]
    checkpoint_ns = configurable["checkpoint_ns"]
    copy = checkpoint.copy()
    values = copy["channel_values"] = copy["channel_values"].copy()
    blob_values: dict[str, Any] = {}
    for k, v in checkpoint["channel_values"].items():
        if v is None or isinstance(v, str | int | float | bool):
            continue
        blob_values[k] = values.pop(k)
        if is_delta_snapshot(v):
            values[k] = True
    blob_versions = {k: v for k, v in new_versions.items() if k in blob_values}
    row = {
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint["id"],
        "parent_id": configurable.get("checkpoint_id"),
        "checkpoint": Jsonb(copy, dumps=jsonb),
        "metadata": Jsonb(get_serializable_checkpoint_metadata(config, metadata), dumps=jsonb),
    }
    blobs = blob_rows(serde, thread_id, checkpoint_ns, blob_values, blob_versions)
    saved: RunnableConfig = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint["id"],
        }
    }
    return row, blobs, saved
