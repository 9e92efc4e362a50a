"""Which pending interrupts a resume answers, and whether each answer is one its graph takes.

``command.resume`` is the answer to the one pending interrupt, or a map from interrupt id to
answer (as LangGraph's SDKs send it when several are pending). Anything else is a 409 that
names the pending ids; an answer its graph's adapter refuses is a 422.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langgraph.types import Interrupt

from api.platform.errors import Conflict, Invalid
from api.project.adapters import GraphAdapter

INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")


def answers_for(
    thread_id: str, interrupts: Sequence[Interrupt], resume: Any, adapter: GraphAdapter
) -> dict[str, Any]:
    """Interrupt id → answer, for a resume of the thread whose pending interrupts these are."""
    by_id = {i.id: i for i in interrupts}
    pending = list(by_id)
    is_map = (
        isinstance(resume, dict)
        and bool(resume)
        and all(isinstance(k, str) and INTERRUPT_ID.fullmatch(k) for k in resume)
    )
    if not pending:
        # Named ids: answered meanwhile (a concurrent answer whose run went past them), or
        # unknown; say which, as when others are pending.
        named = (
            f"Interrupt id(s) {list(resume)} are not pending (already answered or unknown): "
            if is_map
            else ""
        )
        raise Conflict(
            f"{named}Thread {thread_id!r} has no pending interrupt to resume. Start a run "
            "with 'input' instead."
        )
    if is_map:
        unknown = [k for k in resume if k not in pending]
        if unknown:
            raise Conflict(
                f"Interrupt id(s) {unknown} are not pending on this thread (already answered "
                f"or unknown). Pending interrupt ids: {pending}."
            )
    elif len(pending) > 1:
        raise Conflict(
            f"{len(pending)} interrupts are pending ({pending}): send command.resume as a map "
            "from interrupt id to its answer."
        )
    answers = dict(resume) if is_map else {pending[0]: resume}

    for interrupt_id, answer in answers.items():
        try:
            adapter.check_answer(by_id[interrupt_id].value, answer)
        except ValueError as err:
            raise Invalid(f"Invalid decision for interrupt {interrupt_id}: {err}") from None
    return answers
