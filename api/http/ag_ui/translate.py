"""A run's stored events as AG-UI events (:class:`Translator`), one stored event at a time.

What each stored event becomes:

- the first one, whatever it is: ``RUN_STARTED`` (the thread's id, the client's ``runId``, protocol
  version 1.0) before its own events; a later ``metadata`` (attempt 2+: the run was taken over
  after a crash and its step runs again) ends what the lost attempt left open;
- ``messages``: text and tool-call events (:mod:`api.http.ag_ui.chat`), opening the node's step
  (``STEP_STARTED``) at its first chunk;
- ``updates``: per node, ``STEP_STARTED`` (unless its chunks opened it) and ``STEP_FINISHED``,
  after ending the messages it streamed; ``__interrupt__`` (here or in ``values``, whichever
  modes the run stores) is kept for the run's outcome; a task's update LangGraph re-emits from
  cache on resume is skipped;
- ``values``: ``STATE_SNAPSHOT`` the first time, then ``STATE_DELTA`` (JSON Patch) when the state
  changed (:mod:`api.http.ag_ui.snapshots`: the values without ``messages``);
- ``custom``: ``CUSTOM`` named ``custom``, the stream writer's chunk as its value;
- ``error``: kept for ``RUN_ERROR``'s message; ``debug`` and other modes: nothing;
- ``end``: everything still open ends (messages, tool calls, steps); then, for ``success``,
  ``MESSAGES_SNAPSHOT`` (the thread's messages at the last values) and ``RUN_FINISHED`` with
  ``outcome`` ``interrupt`` (the interrupts the run stopped at) or ``success``; for a cancelled
  run (status ``interrupted``) ``MESSAGES_SNAPSHOT`` and ``RUN_FINISHED`` with ``outcome``
  ``cancelled``; for ``error`` and ``timeout``, ``RUN_ERROR`` (``code`` the status).

Deterministic: the same stored events give the same AG-UI events, so a reader resuming after
event N feeds events 1..N first (their output dropped) and continues exactly where it was.
Nothing comes after ``RUN_FINISHED``/``RUN_ERROR``, and those come once.
"""

from __future__ import annotations

from typing import Any

import orjson
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
)

from api.durable.stream_modes import base_mode, is_cached
from api.http.ag_ui.chat import ChatStream
from api.http.ag_ui.interrupts import ag_ui_interrupt
from api.http.ag_ui.snapshots import ag_ui_messages, patch, state_view

PROTOCOL_VERSION = "1.0"
CUSTOM_NAME = "custom"
"""``CUSTOM``'s name for a chunk of LangGraph's ``custom`` stream mode (which names none)."""


class Translator:
    """The AG-UI events of one run's stream; feed it the stored events in order."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        """The client's ``runId`` (the threadline run id for a run not started over AG-UI)."""
        self.started = False
        self.finished = False
        self.chat = ChatStream()
        self.steps: list[str] = []
        self.state: Any = None
        self.has_state = False
        self.messages: Any = None
        self.interrupts: dict[str, Any] = {}
        self.error: str | None = None

    def feed(self, event: str, data: str) -> list[BaseEvent]:
        """The AG-UI events for one stored event (its name and JSON text)."""
        if self.finished:
            return []
        out: list[BaseEvent] = []
        if not self.started:
            self.started = True
            out.append(
                RunStartedEvent(
                    thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
                )
            )
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            return out
        mode = base_mode(event)
        if mode == "messages":
            out += self._messages(value)
        elif mode == "updates":
            out += self._updates(value)
        elif mode == "values":
            out += self._values(value)
        elif mode == "custom":
            out.append(CustomEvent(name=CUSTOM_NAME, value=value))
        elif mode == "metadata" and isinstance(value, dict) and (value.get("attempt") or 1) > 1:
            out += self._close()
        elif mode == "error" and isinstance(value, dict):
            self.error = f"{value.get('error')}: {value.get('message')}"
        elif mode == "end":
            out += self._end(value if isinstance(value, dict) else {})
        return out

    def removed(self) -> list[BaseEvent]:
        """The stream ended without ``end``: the run was removed (a rollback)."""
        if self.finished:
            return []
        self.finished = True
        return [
            RunErrorEvent(
                message="The run was removed (rolled back) before it ended.", code="removed"
            )
        ]

    def _messages(self, value: Any) -> list[BaseEvent]:
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], dict)):
            return []
        message, metadata = value
        out: list[BaseEvent] = []
        node = metadata.get("langgraph_node") if isinstance(metadata, dict) else None
        if isinstance(node, str) and node and node not in self.steps:
            self.steps.append(node)
            out.append(StepStartedEvent(step_name=node))
        return out + self.chat.feed(message)

    def _updates(self, value: Any) -> list[BaseEvent]:
        if not isinstance(value, dict) or is_cached(value):
            return []
        out: list[BaseEvent] = []
        for node, update in value.items():
            if node == "__interrupt__":
                self._interrupted(update)
                continue
            if node == "__metadata__" or is_cached(update):
                continue
            out += self.chat.close()
            if node not in self.steps:
                out.append(StepStartedEvent(step_name=node))
            else:
                self.steps.remove(node)
            out.append(StepFinishedEvent(step_name=node))
        return out

    def _interrupted(self, items: Any) -> None:
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("id"):
                self.interrupts[str(item["id"])] = item.get("value")

    def _values(self, value: Any) -> list[BaseEvent]:
        if isinstance(value, dict):
            if "messages" in value:
                self.messages = value["messages"]
            self._interrupted(value.get("__interrupt__"))
        view = state_view(value)
        if not self.has_state:
            self.has_state, self.state = True, view
            return [StateSnapshotEvent(snapshot=view)]
        operations = patch(self.state, view)
        self.state = view
        return [StateDeltaEvent.model_validate({"delta": operations})] if operations else []

    def _close(self) -> list[BaseEvent]:
        out = self.chat.close()
        out += [StepFinishedEvent(step_name=step) for step in reversed(self.steps)]
        self.steps.clear()
        return out

    def _end(self, end: dict[str, Any]) -> list[BaseEvent]:
        out = self._close()
        self.finished = True
        status = end.get("status")
        if status not in ("success", "interrupted"):
            message = end.get("error") or self.error or f"The run ended with status {status}."
            out.append(RunErrorEvent(message=str(message), code=str(status)))
            return out
        if self.messages is not None:
            out.append(MessagesSnapshotEvent(messages=ag_ui_messages(self.messages)))
        outcome: Any
        if status == "interrupted":  # cancelled (POST .../cancel, or a newer run's interrupt)
            outcome = RunFinishedCancelledOutcome()
        elif self.interrupts:
            outcome = RunFinishedInterruptOutcome(
                interrupts=[
                    ag_ui_interrupt(i, v, self.messages) for i, v in self.interrupts.items()
                ]
            )
        else:
            outcome = RunFinishedSuccessOutcome()
        out.append(RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome))
        return out
