"""An approval's body (``POST /threads/{thread_id}/approvals``): LangChain's human-in-the-loop
decisions, one per action request of the interrupt."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import WithJsonSchema, model_validator

from api.contract.runs import Id, StreamModes, Strict

_DECISION_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "title": "ApproveDecision",
            "properties": {"type": {"const": "approve"}},
            "required": ["type"],
        },
        {
            "type": "object",
            "title": "EditDecision",
            "properties": {
                "type": {"const": "edit"},
                "edited_action": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
                    "required": ["name", "args"],
                    "description": "The asked tool (an edit cannot switch tools) and its full, "
                    "edited arguments, valid under review_configs[0].args_schema.",
                },
            },
            "required": ["type", "edited_action"],
        },
        {
            "type": "object",
            "title": "RejectDecision",
            "properties": {"type": {"const": "reject"}, "message": {"type": "string"}},
            "required": ["type"],
        },
    ]
}
Decisions = Annotated[
    list[dict[str, Any]],
    WithJsonSchema(
        {
            "type": "array",
            "items": _DECISION_SCHEMA,
            "minItems": 1,
            "description": "One decision per action request of the interrupt, in their order "
            "(LangChain's human-in-the-loop format).",
        }
    ),
]
"""Checked in full, against the asked tool, when the run is created (the graph's own check)."""
DECISIONS_SHAPE = (
    '{"decisions": [<one decision per action request, in their order>]}, where a decision is '
    '{"type": "approve"}, '
    '{"type": "edit", "edited_action": {"name": "<the asked tool>", "args": {...all arguments}}} '
    'or {"type": "reject", "message"?: "..."}'
)


class ApprovalBody(Strict):
    """An answer to one approval interrupt: its id and ``{"decisions": [...]}``."""

    interrupt_id: Id
    decisions: Decisions
    stream_mode: StreamModes = ["updates", "custom"]

    @model_validator(mode="before")
    @classmethod
    def new_format(cls, data: Any) -> Any:
        if isinstance(data, dict) and "decisions" not in data:
            old = ' (the {"decision": ...} format is gone)' if "decision" in data else ""
            raise ValueError(
                f'an approval is {{"interrupt_id": "...", "decisions": [...]}}{old}: '
                f"{DECISIONS_SHAPE}"
            )
        return data
