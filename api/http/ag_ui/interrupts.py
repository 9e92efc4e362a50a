"""LangGraph interrupts as AG-UI 1.0's ``Interrupt``, and AG-UI's ``resume`` entries as the answers
a graph takes.

Out (``RUN_FINISHED`` ``outcome: {type: "interrupt", interrupts: [...]}``): ``id`` is the
LangGraph interrupt id (what a resume entry's ``interruptId`` names); ``metadata.value`` is the
interrupt's value, verbatim (AG-UI's ``Interrupt`` has no value field and its client strips
unknown ones). An approval request of LangChain's human-in-the-loop middleware
(``{"action_requests": [...], "review_configs": [...]}``, the built-in agent's) is
``reason: "tool_approval"`` with a ``message`` (the requests' descriptions), the ``toolCallId``
when it asks about one call whose tool call is in the thread, and a ``responseSchema`` for
``{"decisions": [...]}`` (one decision per request, of the types its review config allows).
Any other value: ``reason: "interrupt"``, ``message`` when the value is a string.

In: a ``resolved`` entry's ``payload`` is the answer. A ``cancelled`` entry rejects every call of
an approval request (the model is told the user cancelled it); for any other interrupt a cancel
has no meaning the graph defines, so it is refused (422): answer it with ``resolved``.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt

from api.contract import hitl
from api.platform.errors import Invalid

CANCELLED = "The user cancelled this request (AG-UI resume status 'cancelled')."


def ag_ui_interrupt(interrupt_id: str, value: Any, messages: Any) -> Interrupt:
    """One pending interrupt, for ``RUN_FINISHED``'s outcome (``messages``: the thread's values'
    messages, where an approval's tool call is looked up)."""
    if not hitl.is_request(value):
        return Interrupt(
            id=interrupt_id,
            reason="interrupt",
            message=value if isinstance(value, str) else None,
            metadata={"value": value},
        )
    requests = hitl.actions(value)
    described = [str(r.get("description") or f"Run {r.get('name')}?") for r in requests]
    call_id = _tool_call_id(requests[0], messages) if len(requests) == 1 else None
    return Interrupt(
        id=interrupt_id,
        reason="tool_approval",
        message="\n".join(described) or None,
        tool_call_id=call_id,
        response_schema=_decisions_schema(value, len(requests)),
        metadata={"value": value},
    )


def answer(entry: Any, value: Any) -> Any:
    """The resume value for one ``ResumeEntry`` answering an interrupt whose value is ``value``."""
    if entry.status == "resolved":
        if entry.payload is None:
            raise Invalid(
                f"resume entry for interrupt {entry.interrupt_id}: status 'resolved' needs a "
                'payload, the answer (for an approval: {"decisions": [{"type": "approve"}]}).'
            )
        return entry.payload
    if not hitl.is_request(value):
        raise Invalid(
            f"Interrupt {entry.interrupt_id} is not an approval request: a 'cancelled' resume "
            "has no meaning for it. Answer it with status 'resolved' and the payload it asks for."
        )
    return hitl.reject_all(value, CANCELLED)


def _tool_call_id(request: dict[str, Any], messages: Any) -> str | None:
    """The id of the last tool call in ``messages`` with the request's tool and arguments."""
    for message in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict) or message.get("type") != "ai":
            continue
        for call in message.get("tool_calls") or []:
            if (
                isinstance(call, dict)
                and call.get("name") == request.get("name")
                and call.get("args") == request.get("args")
                and call.get("id")
            ):
                return str(call["id"])
    return None


def _decisions_schema(value: dict[str, Any], count: int) -> dict[str, Any]:
    allowed: set[str] = set()
    for config in value.get("review_configs") or []:
        if isinstance(config, dict):
            allowed.update(str(d) for d in config.get("allowed_decisions") or [])
    decision: dict[str, Any] = {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"enum": sorted(allowed or {"approve", "edit", "reject"})},
            "message": {"type": "string"},
            "edited_action": {"type": "object"},
        },
    }
    return {
        "type": "object",
        "required": ["decisions"],
        "properties": {
            "decisions": {"type": "array", "minItems": count, "maxItems": count, "items": decision}
        },
    }
