"""The AG-UI SSE stream of a run: its stored events after a sequence number, translated
(:mod:`api.http.ag_ui.translate`), then live ones until its end, on any replica.

Every frame is ``id: <position>`` and ``data: <event JSON>`` (``ag_ui.encoder.EventEncoder``'s
wire format; no ``event:`` line, so ``EventSource``'s ``onmessage`` sees them). The position is
the stored event the frame comes from, ``<seq>``, or ``<seq>.<part>`` when that stored event gives
several AG-UI events (:mod:`api.http.ag_ui.resume_point`). Each event's ``rawEvent`` carries the
same position, ``{"threadline": {"event_id", "run_id"}}``, for clients that see events, not
frames (``HttpAgent``'s subscribers). The frames of one stored batch go out in one write.

A reader resuming after a position (``Last-Event-ID``) gets the events after it: the translator
is first fed the stored events before it (their output dropped), so what follows is what the
first connection would have sent. The continuation starts with ``RUN_STARTED`` and the start
events of what was open at that point, without ``id`` (a valid stream on its own, as
``HttpAgent`` requires); no content is sent twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder

from api.durable.event_follow import follow
from api.http.ag_ui.resume_point import Opened, event_id
from api.http.ag_ui.translate import Translator
from api.platform.errors import Invalid
from api.runs.service import Service
from api.store import events

ENCODER = EventEncoder()


def ag_ui_run_id(run: dict[str, Any]) -> str:
    """The run's AG-UI ``runId``: the client's, for a run started over AG-UI."""
    tag = (run.get("metadata") or {}).get("ag_ui")
    found = tag.get("run_id") if isinstance(tag, dict) else None
    return found if isinstance(found, str) and found else str(run["run_id"])


async def check_after(svc: Service, run_id: str, after: int) -> None:
    """A ``Last-Event-ID`` past the run's last stored event was never sent: 422."""
    if after <= 0:
        return
    async with svc.pool.connection() as conn:
        last = await events.last_seq(conn, run_id)
    if after > last:
        raise Invalid(
            f"Last-Event-ID {after} is past this run's last event ({last}): send the id of the "
            "last event you received, or none to read from the start."
        )


async def frames(
    svc: Service, run: dict[str, Any], after: int, part: int | None = None
) -> AsyncIterator[bytes]:
    """SSE frames of the run's AG-UI events after position ``after`` (``.part``)."""
    run_id = str(run["run_id"])
    translator = Translator(run["thread_id"], ag_ui_run_id(run))
    seen = Opened()
    whole = after - 1 if part is not None else after  # stored events the reader has all of
    if whole > 0:
        await _replay(svc, run_id, whole, translator, seen)
    due = after > 0  # the continuation's start: before the first event past the position
    seq = after
    async for rows in follow(svc.pool, svc.hub, run_id, after=whole):
        out: list[bytes] = []
        for row in rows:
            seq = row["seq"]
            if seq <= whole:  # ``follow`` sends the end again to a reader past it
                continue
            produced = translator.feed(row["event"], row["data"])
            for index, event in enumerate(produced):
                if seq == after and part is not None and index <= part:
                    seen.see(event)
                    continue
                if due:
                    out += [_frame(start, None, run_id) for start in seen.reopened()]
                    due = False
                out.append(_frame(event, event_id(seq, index, len(produced)), run_id))
        if out:
            yield b"".join(out)
    tail = translator.removed()
    if tail:
        yield b"".join(_frame(event, str(seq), run_id) for event in tail)


async def _replay(
    svc: Service, run_id: str, after: int, translator: Translator, seen: Opened
) -> None:
    """Feed the translator what the reader already has (events ``1..after``)."""
    done = 0
    while done < after:
        async with svc.pool.connection() as conn:
            rows = await events.read(conn, run_id, done)
        if not rows:
            return
        for row in rows:
            if row["seq"] > after:
                return
            for event in translator.feed(row["event"], row["data"]):
                seen.see(event)
            done = row["seq"]


def _frame(event: BaseEvent, position: str | None, run_id: str) -> bytes:
    if position is None:
        return ENCODER.encode(event).encode()
    raw = {"threadline": {"event_id": position, "run_id": run_id}}
    return f"id: {position}\n{ENCODER.encode(event.model_copy(update={'raw_event': raw}))}".encode()
