"""Where a reconnecting AG-UI reader was, and what it needs to read on from there.

- A position is ``<seq>`` (stored event ``seq``, all of its AG-UI events seen) or
  ``<seq>.<part>`` (its AG-UI events ``0..part`` seen): one stored event can give several AG-UI
  events (a chunk that opens a step, a text message and a tool call), and a connection can break
  between them.
- :class:`Opened` follows the AG-UI events a reader has seen and tells what is still open at its
  position. A continuation starts with ``RUN_STARTED`` and the start events of those (a step, a
  text message, a tool call), so that it is a valid AG-UI stream on its own (the official
  client's ``HttpAgent`` checks every stream it reads); they carry no ``id``, and no content is
  sent twice.
"""

from __future__ import annotations

import re
from typing import Any

from ag_ui.core import BaseEvent, EventType

from api.platform.errors import Invalid

POSITION = r"^([0-9]{1,18})(?:\.([0-9]{1,6}))?$"
_POSITION = re.compile(POSITION)


def parse(value: str | None) -> tuple[int, int | None]:
    """``Last-Event-ID``: ``(seq, part)``; ``(0, None)`` (from the start) when there is none."""
    if value is None or value.strip() == "":
        return 0, None
    found = _POSITION.fullmatch(value.strip())
    if found is None or (found[2] is not None and int(found[1]) == 0):
        raise Invalid(
            f"Last-Event-ID must be the id of an event of this stream (<seq> or <seq>.<part>), "
            f"not {value[:100]!r}."
        )
    return int(found[1]), (int(found[2]) if found[2] is not None else None)


def event_id(seq: int, part: int, parts: int) -> str:
    """The ``id`` of a stored event's ``part``-th AG-UI event, of ``parts``."""
    return str(seq) if parts == 1 else f"{seq}.{part}"


class Opened:
    """What the AG-UI events a reader has seen left open."""

    def __init__(self) -> None:
        self.run_started: BaseEvent | None = None
        self.finished = False
        self.steps: dict[str, BaseEvent] = {}
        self.texts: dict[str, BaseEvent] = {}
        self.calls: dict[str, BaseEvent] = {}

    def see(self, event: BaseEvent) -> None:
        data: Any = event
        match event.type:
            case EventType.RUN_STARTED:
                self.run_started = event
            case EventType.RUN_FINISHED | EventType.RUN_ERROR:
                self.finished = True
            case EventType.STEP_STARTED:
                self.steps[data.step_name] = event
            case EventType.STEP_FINISHED:
                self.steps.pop(data.step_name, None)
            case EventType.TEXT_MESSAGE_START:
                self.texts[data.message_id] = event
            case EventType.TEXT_MESSAGE_END:
                self.texts.pop(data.message_id, None)
            case EventType.TOOL_CALL_START:
                self.calls[data.tool_call_id] = event
            case EventType.TOOL_CALL_END:
                self.calls.pop(data.tool_call_id, None)

    def reopened(self) -> list[BaseEvent]:
        """``RUN_STARTED`` and the start events of what is open (steps, then text messages,
        then tool calls, each in the order they opened); nothing once the run finished."""
        if self.run_started is None or self.finished:
            return []
        return [
            self.run_started,
            *self.steps.values(),
            *self.texts.values(),
            *self.calls.values(),
        ]
