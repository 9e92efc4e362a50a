"""Safe concurrency of one step's tool calls: reads together up to a cap, writes one at a time in
the order the model gave them.

Every call of a step is its own ``Send`` task of the ``tools`` node, and LangGraph runs the tasks
of a superstep at once. The router puts in each payload (``ToolTask``) the call's ``position`` in
the model's message and, on a call that writes (a tool that is not read-only, an MCP tool without
a read-only hint, an unknown tool), ``after``: the ids of the step's earlier calls that write.

- A read-only call holds one of its thread's ``read_limit`` slots while it runs (an
  ``asyncio.Semaphore`` per thread in this process).
- A call that writes runs once every call in its ``after`` is done. A call is done once its task
  returns, whatever it returned: a denied, rejected or refused call runs nothing, is done at once
  and never holds up the calls after it.
- A payload without the fields (checkpointed before they existed) runs at once, as it did then.

Deterministic after a crash. LangGraph re-runs only the unfinished tasks of a superstep, all of
them together in one process; a finished task is a saved pending write of the step's checkpoint
and does not run again. So an earlier write is either done in this process (an ``asyncio.Event``
per call, keyed by thread, namespace and the step's checkpoint id), or saved in the checkpoint
(its ``ToolMessage`` is a pending write: finished by an earlier attempt, perhaps in another
process), or one of the tasks running here now, which will signal. The checkpoint is read only
for an earlier write this process has not seen start, and again every ``recheck_seconds`` while
waiting: a safety net, so that anything unforeseen costs a delay instead of a hang. A call done
here whose save was lost (the attempt died in between) still counts as done: its effect came
first, and when it runs again the service's tool-call hooks replay its recorded result.

A call whose task stops with an interrupt is marked stopped: the writes waiting for it stop too
(``GraphInterrupt`` without interrupts, so they save nothing and run on resume). A task that
fails or is cancelled stays not done: LangGraph cancels the step's other tasks, and the call
signals when it runs again (a retry, a later attempt in this process).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.runtime import ExecutionInfo, Runtime

from agent.state import ToolTask

logger = logging.getLogger(__name__)

RECHECK_SECONDS = 5.0
"""How often a waiting write re-reads the checkpoint (the safety net), by default."""

_RUNTIME_KEY = "__pregel_runtime"
"""Where LangGraph puts a task's ``Runtime`` (what ``langgraph.runtime.get_runtime`` reads)."""


@dataclass
class _Call:
    done: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: bool = False


@dataclass
class _Step:
    """The writes of one superstep of one thread that this process has seen."""

    calls: dict[str, _Call] = field(default_factory=dict)
    users: int = 0
    idle_since: float = 0.0


@dataclass
class _Slots:
    semaphore: asyncio.Semaphore
    users: int = 0


def _execution_info(config: RunnableConfig) -> ExecutionInfo | None:
    runtime = (config.get("configurable") or {}).get(_RUNTIME_KEY)
    return runtime.execution_info if isinstance(runtime, Runtime) else None


def _thread_id(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("thread_id") or "")


def _parent_ns(info: ExecutionInfo) -> str:
    """The namespace of the graph the task runs in (``""`` at the root): the task's own minus
    its last ``node:task_id`` part."""
    return info.checkpoint_ns.rpartition("|")[0]


async def saved_results(config: RunnableConfig) -> set[str]:
    """Tool call ids whose ``ToolMessage`` is already a saved pending write of the current step's
    checkpoint (empty without a checkpointer)."""
    saver = (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER)
    info = _execution_info(config)
    if saver is None or info is None:
        return set()
    saved = await saver.aget_tuple(
        {
            "configurable": {
                "thread_id": info.thread_id or _thread_id(config),
                "checkpoint_ns": _parent_ns(info),
                "checkpoint_id": info.checkpoint_id,
            }
        }
    )
    ids: set[str] = set()
    for _task_id, channel, value in (saved.pending_writes or []) if saved else []:
        if channel != "messages":
            continue
        for message in value if isinstance(value, list) else [value]:
            if isinstance(message, ToolMessage):
                ids.add(message.tool_call_id)
    return ids


def is_write(task: ToolTask) -> bool:
    """A call that runs in order with the step's other writes (its payload says so)."""
    return "after" in task


class ToolTurns:
    """When each tool call of a step may run (see the module docstring); one per tools node."""

    def __init__(
        self, read_limit: int, *, recheck_seconds: float | None = None, keep_seconds: float = 60.0
    ) -> None:
        if read_limit < 1:
            raise ValueError("read_limit must be at least 1")
        self.read_limit = read_limit
        self.recheck_seconds = RECHECK_SECONDS if recheck_seconds is None else recheck_seconds
        self.keep_seconds = keep_seconds
        self._steps: dict[tuple[str, str, str], _Step] = {}
        self._slots: dict[str, _Slots] = {}

    def _step(self, config: RunnableConfig) -> _Step:
        info = _execution_info(config)
        key = (
            _thread_id(config),
            _parent_ns(info) if info else "",
            info.checkpoint_id if info else "",
        )
        now = time.monotonic()
        for old in [k for k, s in self._steps.items() if k != key and s.users == 0]:
            if now - self._steps[old].idle_since > self.keep_seconds:
                del self._steps[old]
        return self._steps.setdefault(key, _Step())

    @asynccontextmanager
    async def call(self, task: ToolTask, config: RunnableConfig) -> AsyncIterator[None]:
        """Around a whole tools-node call: a write is known to its step while inside, and done
        when the block ends without an exception."""
        if not is_write(task):
            yield
            return
        step = self._step(config)
        call_id = str(task["tool_call"]["id"])
        entry = step.calls.setdefault(call_id, _Call())
        step.users += 1
        try:
            yield
        except GraphBubbleUp:
            entry.stopped = True
            entry.done.set()  # wakes the writes waiting for it, which stop too
            if step.calls.get(call_id) is entry:
                step.calls[call_id] = _Call()  # it runs again on resume, and signals then
            raise
        else:
            entry.done.set()
        finally:
            step.users -= 1
            step.idle_since = time.monotonic()

    @asynccontextmanager
    async def turn(self, task: ToolTask, config: RunnableConfig) -> AsyncIterator[None]:
        """Around a call's execution: a read holds a slot of its thread, a write waits for the
        step's earlier writes; a payload from before either runs at once."""
        if is_write(task):
            await self._wait_for(self._step(config), task.get("after") or [], config)
            yield
        elif "position" in task:
            async with self._read_slot(_thread_id(config)):
                yield
        else:
            yield

    @asynccontextmanager
    async def _read_slot(self, thread_id: str) -> AsyncIterator[None]:
        slots = self._slots.get(thread_id)
        if slots is None:
            slots = self._slots[thread_id] = _Slots(asyncio.Semaphore(self.read_limit))
        slots.users += 1
        try:
            async with slots.semaphore:
                yield
        finally:
            slots.users -= 1
            if slots.users == 0 and self._slots.get(thread_id) is slots:
                del self._slots[thread_id]

    async def _wait_for(self, step: _Step, earlier: Iterable[str], config: RunnableConfig) -> None:
        pending = [str(i) for i in earlier if not self._finished(step, str(i))]
        if any(i not in step.calls for i in pending):  # not seen here: maybe done before
            saved = await saved_results(config)
            pending = [i for i in pending if i not in saved]
        for call_id in pending:
            entry = step.calls.setdefault(call_id, _Call())
            while not entry.done.is_set():
                try:
                    await asyncio.wait_for(entry.done.wait(), self.recheck_seconds)
                except TimeoutError:
                    if call_id in await saved_results(config):
                        logger.warning("tool call %s found done in the checkpoint only", call_id)
                        break
                    entry = step.calls.get(call_id, entry)
            if entry.stopped:
                raise GraphInterrupt(())

    @staticmethod
    def _finished(step: _Step, call_id: str) -> bool:
        entry = step.calls.get(call_id)
        return entry is not None and entry.done.is_set() and not entry.stopped

    def snapshot(self) -> dict[str, Any]:
        """What is held now (for tests and debugging): steps and read slots per thread."""
        return {
            "steps": {"/".join(k): len(s.calls) for k, s in self._steps.items()},
            "reading": {t: s.users for t, s in self._slots.items()},
        }
