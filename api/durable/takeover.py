"""The takeover dedupe: an update an earlier attempt of the run already stored is not sent twice.

When a run is resumed by a later attempt, LangGraph re-emits the ``updates`` of tasks it does not
run again (``cached``), and a tool call whose result was streamed but not checkpointed before the
process died runs again and returns its recorded result (the graph says so in a ``custom`` chunk,
read by its adapter). Either update may already be in the run's event log: it is dropped once
for each stored copy, matched by :func:`update_key`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from api.durable.stream_modes import base_mode, is_cached, tool_call_ids
from api.platform.database import Pool
from api.platform.serde import dumps
from api.store import events


def update_key(data_json: str) -> str:
    """What identifies an ``updates`` event across attempts: its JSON without ``__metadata__``
    and without message ids (``add_messages`` may give a message its id after the update was
    first stored, while the saved pending write that a cached update comes from has none)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            message = "type" in value and "content" in value
            return {
                k: strip(v)
                for k, v in value.items()
                if k != "__metadata__" and not (message and k == "id")
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.dumps(strip(json.loads(data_json)), sort_keys=True)


class TakeoverDedupe:
    """Decides, chunk by chunk, what one attempt must not send again."""

    def __init__(self, pool: Pool, run_id: str, replayed_call: Callable[[Any], str | None]):
        self.pool, self.run_id, self.replayed_call = pool, run_id, replayed_call
        self.replayed: set[str] = set()
        self.sent: Counter[str] | None = None
        """The run's stored updates by key, read at the first chunk that may repeat one."""

    async def repeated(self, event: str, chunk: Any) -> bool:
        """Whether ``chunk`` is a copy of an update an earlier attempt stored as ``event``
        (``updates``, or a subgraph's ``updates|<namespace>``; then dropped)."""
        mode = base_mode(event)
        if mode == "custom" and (call_id := self.replayed_call(chunk)):
            self.replayed.add(call_id)
        if mode != "updates" or not (
            is_cached(chunk) or (self.replayed and tool_call_ids(chunk) & self.replayed)
        ):
            return False
        chunk = {k: v for k, v in chunk.items() if k != "__metadata__"}
        if self.sent is None:
            async with self.pool.connection() as conn:
                stored = await events.stored_updates(conn, self.run_id)
            self.sent = Counter(f"{name} {update_key(data)}" for name, data in stored)
        key = f"{event} {update_key(dumps(chunk))}"
        if self.sent[key] > 0:
            self.sent[key] -= 1
            return True
        return False
