"""Threads' time-to-live: ``langgraph.json`` ``"checkpointer": {"ttl": {...}}`` and the API's
per-thread ``ttl`` (``POST /threads``, ``PATCH /threads/{id}``), as LangGraph Server has them
(``ThreadTTLConfig``; the ``TTL`` of ``ThreadCreate`` and ``ThreadPatch``).

- A thread with a TTL that has not been updated for that many minutes (created, patched, a run
  queued on it or ended: its ``updated_at``) expires. ``delete`` removes it with its runs,
  events, checkpoints, schedules and workspace, as ``DELETE /threads/{id}`` does;
  ``keep_latest`` keeps it and its current state and drops its older checkpoints, as
  ``POST /threads/prune`` does. A thread with a pending or running run is never swept.
- A new thread gets the TTL its request names, else the config's ``default_ttl`` (with its
  ``strategy``, default ``delete``): threads made before the config existed keep none, as
  LangGraph documents. A ``PATCH`` with a ``ttl`` sets it anew, counting from then.
- Every ``sweep_interval_minutes`` (default 5; ``THREADLINE_TTL_SWEEP_SECONDS`` overrides it)
  each process sweeps up to ``sweep_limit`` (default 10,000) expired threads, in batches, each
  batch one transaction that takes its rows with ``FOR UPDATE SKIP LOCKED``: a thread another
  replica holds is that replica's to sweep (no work is done twice), and one whose run is being
  created (the creator holds the row) is kept. A crash before the commit deletes nothing: the
  next pass, on any replica, finds those threads again. ``keep_latest`` threads are marked
  pruned in that transaction and compacted after it, at most once: one a crash left as it was
  is compacted at its next expiry.

A bad value stops the start with one line (:class:`~api.project.graphs.GraphConfigError`); what is
not served (another checkpointer ``backend`` or ``path``, ``serde``) is named in a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from api.contract.thread_ttl import MAX_TTL_MINUTES, TTLStrategy
from api.durable.compaction import ThreadBusy, compact_thread
from api.platform.db_health import log_failure
from api.platform.errors import NotFound
from api.project.graphs import GraphConfigError, read_config
from api.project.http_config import ConfigModel, validated, warn_of_unknown
from api.runs.core import Core
from api.store import thread_ttl, threads

logger = logging.getLogger(__name__)

BATCH = 100
DEFAULT_SWEEP_MINUTES = 5
DEFAULT_SWEEP_LIMIT = 10_000


class TTLConfig(ConfigModel):
    """``ThreadTTLConfig``."""

    strategy: TTLStrategy = "delete"
    default_ttl: float | None = Field(None, gt=0, le=MAX_TTL_MINUTES)
    sweep_interval_minutes: int | None = Field(None, ge=1)
    sweep_limit: int | None = Field(None, ge=1)


class CheckpointerConfig(ConfigModel):
    backend: Literal["default", "custom", "mongo"] | None = None
    path: str | None = None
    uri: str | None = None
    ttl: TTLConfig | None = None
    serde: dict[str, Any] | None = None


@dataclass(frozen=True)
class ThreadTTL:
    """How threads expire on this server."""

    strategy: TTLStrategy = "delete"
    default_minutes: float | None = None
    """What a new thread gets when its request names no ``ttl``; None: no TTL."""
    sweep_seconds: float = DEFAULT_SWEEP_MINUTES * 60
    sweep_limit: int = DEFAULT_SWEEP_LIMIT


def read_ttl(config_file: Path | None, sweep_seconds: float | None = None) -> ThreadTTL:
    """The config's ``checkpointer.ttl`` (the defaults without one), checked; new threads get
    its ``default_ttl`` from now on (``api.store.threads.use_default_ttl``). ``sweep_seconds``:
    ``THREADLINE_TTL_SWEEP_SECONDS``, over the config's interval."""
    data = read_config(config_file) if config_file else None
    raw = data.get("checkpointer") if isinstance(data, dict) else None
    config = TTLConfig()
    if raw is not None and config_file is not None:
        if not isinstance(raw, dict):
            raise GraphConfigError(f'{config_file}: "checkpointer" must be an object')
        checkpointer = validated(config_file, "checkpointer", CheckpointerConfig, raw)
        if isinstance(raw.get("ttl"), dict):
            warn_of_unknown(config_file, "checkpointer.ttl", TTLConfig, raw["ttl"])
        _warn_of_unserved(config_file, checkpointer)
        config = checkpointer.ttl or config
    minutes = config.sweep_interval_minutes or DEFAULT_SWEEP_MINUTES
    ttl = ThreadTTL(
        strategy=config.strategy,
        default_minutes=config.default_ttl,
        sweep_seconds=sweep_seconds or minutes * 60.0,
        sweep_limit=config.sweep_limit or DEFAULT_SWEEP_LIMIT,
    )
    default = (ttl.strategy, ttl.default_minutes) if ttl.default_minutes is not None else None
    threads.use_default_ttl(default)
    return ttl


def _warn_of_unserved(config_file: Path, checkpointer: CheckpointerConfig) -> None:
    unserved = []
    if checkpointer.backend not in (None, "default") or checkpointer.path:
        what = checkpointer.path or checkpointer.backend
        unserved.append(f"backend {what!r} (checkpoints are kept in threadline's PostgreSQL)")
    if checkpointer.serde is not None:
        unserved.append("serde (threadline's serializer is used as it is)")
    if unserved:
        logger.warning(
            '%s: "checkpointer" settings not served by threadline and ignored: %s',
            config_file,
            "; ".join(unserved),
        )


async def sweep(service: Core, limit: int) -> tuple[int, int]:
    """One pass: delete or prune up to ``limit`` expired threads; how many of each."""
    deleted = pruned = 0
    while deleted + pruned < limit:
        batch = min(BATCH, limit - deleted - pruned)
        async with service.pool.connection() as conn, conn.transaction():
            locked, rows = await thread_ttl.take_expired(conn, batch)
            gone = [r["thread_id"] for r in rows if r["ttl_strategy"] != "keep_latest"]
            kept = [r["thread_id"] for r in rows if r["ttl_strategy"] == "keep_latest"]
            await thread_ttl.delete(conn, gone)
            await thread_ttl.mark_pruned(conn, kept)
        for thread_id in gone:
            for adapter in service.runtime.adapters.values():  # the built-in agent's workspace
                adapter.thread_deleted(thread_id)
        for thread_id in kept:
            await _keep_latest(service, thread_id)
        deleted += len(gone)
        pruned += len(kept)
        if locked < batch or not rows:
            break
    return deleted, pruned


async def _keep_latest(service: Core, thread_id: str) -> None:
    try:
        graph = service.graph(await service.assistant_of(thread_id))
        done = await compact_thread(
            service.pool, service.runtime.saver, graph, thread_id, check_idle=True
        )
    except (ThreadBusy, NotFound):
        return  # a run came (or the thread went) meanwhile: it is no longer expired
    if done.skipped:
        logger.info("thread %s past its TTL kept as it is: %s", thread_id, done.skipped)


@asynccontextmanager
async def sweeping(service: Core, ttl: ThreadTTL) -> AsyncIterator[None]:
    """This process's sweep loop, from start-up to shutdown."""
    task = asyncio.create_task(_loop(service, ttl), name="threadline-thread-ttl")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _loop(service: Core, ttl: ThreadTTL) -> None:
    while True:
        try:
            deleted, pruned = await sweep(service, ttl.sweep_limit)
            if deleted or pruned:
                logger.info("threads past their TTL: %d deleted, %d pruned", deleted, pruned)
        except Exception as err:  # the database went away a moment: try again next pass
            log_failure(logger, service.pool.health, err, "sweeping threads past their TTL failed")
        await asyncio.sleep(ttl.sweep_seconds)
