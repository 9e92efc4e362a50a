"""A resume's answers against what is pending (``api.runs.resume.answers_for``)."""

from __future__ import annotations

import pytest

from api.platform.errors import Conflict
from api.project.adapters import DEFAULT
from api.runs.resume import answers_for

ANSWERED = "2a8e1bda3e044390ef27297b4d65b34f"


def test_an_answer_to_an_interrupt_answered_meanwhile_names_it() -> None:
    """Two approvals of one interrupt at once: the second, checked after the first one's run
    went past the interrupt, finds nothing pending, and is told its interrupt was answered."""
    with pytest.raises(Conflict) as err:
        answers_for("t1", [], {ANSWERED: {"decisions": [{"type": "approve"}]}}, DEFAULT)
    assert ANSWERED in err.value.message and "already answered" in err.value.message


def test_a_plain_resume_with_nothing_pending_says_to_start_a_run() -> None:
    with pytest.raises(Conflict, match="no pending interrupt to resume"):
        answers_for("t1", [], "yes", DEFAULT)
