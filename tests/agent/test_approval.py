"""The approval format: LangChain's human-in-the-loop request and answer (``agent.approval``).

One request asks about every asking call of an agent step, in the model's order; the answer holds
one decision per action request, in the same order.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.approval import (
    ApprovalDecision,
    AskedCall,
    answer_shape,
    approval_calls,
    approval_request,
    is_approval_request,
    parse_decisions,
    superseded_answer,
)
from agent.tools import ToolSpec, default_tools

TOOLS = {t.name: t for t in default_tools()}
WRITE = TOOLS["write_file"]
RUN = TOOLS["run_command"]
ARGS = {"path": "greeting.txt", "content": "Hello, Ada!\n"}
COMMAND = {"command": ["python3", "-c", "print(0)"]}
DEFAULT = {"rule": "ask", "source": "default", "server_rule": "ask"}


def asked(tool: ToolSpec, call_id: str = "c", args: Any = None, ruling: Any = None) -> AskedCall:
    return AskedCall(tool=tool, call_id=call_id, args=args or {}, ruling=ruling or DEFAULT)


def edit_decision(args: Any, name: str = "write_file") -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


def edit(args: Any, name: str = "write_file") -> dict[str, Any]:
    return {"decisions": [edit_decision(args, name)]}


def parse_one(answer: Any, tool: ToolSpec | None = WRITE, name: str = "write_file") -> Any:
    (decision,) = parse_decisions(answer, [tool], [name])
    return decision


def test_the_request_is_one_action_request_with_its_review_config() -> None:
    ruling = {"rule": "ask", "source": "task", "server_rule": "ask"}
    value = approval_request([asked(WRITE, "call_1", ARGS, ruling)])
    assert value == {
        "action_requests": [
            {
                "name": "write_file",
                "args": ARGS,
                "description": "the task's approval policy asks for it: the approval policy "
                "says 'ask'",
            }
        ],
        "review_configs": [
            {
                "action_name": "write_file",
                "allowed_decisions": ["approve", "edit", "reject"],
                "args_schema": WRITE.args_schema.model_json_schema(),
            }
        ],
        "tool_call_ids": ["call_1"],
        "policies": [ruling],
    }
    assert "type" not in value
    assert is_approval_request(value)
    assert approval_calls(value) == [("write_file", ARGS)]


def test_a_request_for_two_calls_lists_them_in_the_models_order() -> None:
    run_ruling = {"rule": "ask", "source": "run", "server_rule": "auto"}
    value = approval_request(
        [asked(WRITE, "call_w", ARGS), asked(RUN, "call_r", COMMAND, run_ruling)]
    )
    assert [a["name"] for a in value["action_requests"]] == ["write_file", "run_command"]
    assert [a["args"] for a in value["action_requests"]] == [ARGS, COMMAND]
    assert [a["description"] for a in value["action_requests"]] == [
        "write_file is not read-only: the approval policy says 'ask'",
        "the run's approval policy asks for it: the approval policy says 'ask'",
    ]
    assert [r["action_name"] for r in value["review_configs"]] == ["write_file", "run_command"]
    assert value["review_configs"][1]["args_schema"] == RUN.args_schema.model_json_schema()
    assert value["tool_call_ids"] == ["call_w", "call_r"]
    assert value["policies"] == [DEFAULT, run_ruling]
    assert is_approval_request(value)
    assert approval_calls(value) == [("write_file", ARGS), ("run_command", COMMAND)]


def test_the_default_description_says_why_it_asks() -> None:
    (action,) = approval_request([asked(TOOLS["edit_file"])])["action_requests"]
    assert action["description"] == "edit_file is not read-only: the approval policy says 'ask'"


@pytest.mark.parametrize(
    "value",
    [
        None,
        "approve",
        {"type": "approval", "tool": "write_file", "args": {}, "tool_call_id": "c"},
        {"action_requests": [], "tool_call_ids": []},
        {"action_requests": [{"name": "x", "args": {}}]},  # LangChain's own: no tool_call_ids
        # The one-call shape of before: a single tool_call_id and policy.
        {"action_requests": [{"name": "x", "args": {}}], "tool_call_id": "c", "policy": {}},
        # A call without its id (or an id without its call).
        {"action_requests": [{"name": "x", "args": {}}] * 2, "tool_call_ids": ["c"]},
    ],
)
def test_what_is_not_an_approval_request(value: Any) -> None:
    assert not is_approval_request(value)
    with pytest.raises(ValueError, match="not an approval request"):
        approval_calls(value)


def test_valid_decisions() -> None:
    assert parse_one({"decisions": [{"type": "approve"}]}) == ApprovalDecision("approve")
    assert parse_one({"decisions": [{"type": "reject", "message": "not today"}]}) == (
        ApprovalDecision("reject", message="not today")
    )
    assert parse_one({"decisions": [{"type": "reject"}]}, None) == ApprovalDecision("reject")
    edited = {"path": "greeting.txt", "content": "Hi!\n"}
    assert parse_one(edit(edited)) == ApprovalDecision("edit", args=edited)


def test_one_decision_per_call_in_their_order() -> None:
    edited = {"command": ["python3", "-c", "print(2)"]}
    answer = {
        "decisions": [
            {"type": "reject", "message": "not that file"},
            edit_decision(edited, "run_command"),
        ]
    }
    assert parse_decisions(answer, [WRITE, RUN], ["write_file", "run_command"]) == [
        ApprovalDecision("reject", message="not that file"),
        ApprovalDecision("edit", args=edited),
    ]
    both = {"decisions": [{"type": "approve"}, {"type": "approve"}]}
    assert parse_decisions(both, [WRITE, WRITE], ["write_file", "write_file"]) == [
        ApprovalDecision("approve"),
        ApprovalDecision("approve"),
    ]


@pytest.mark.parametrize("count", [0, 1, 3])
def test_the_count_of_decisions_must_match_the_calls(count: int) -> None:
    answer = {"decisions": [{"type": "approve"}] * count}
    with pytest.raises(ValueError) as err:
        parse_decisions(answer, [WRITE, WRITE], ["write_file", "write_file"])
    assert f"'decisions' must hold exactly 2 (the request asks about 2 calls), not {count}" in (
        str(err.value)
    )
    assert "2 decisions, one per action request in their order" in str(err.value)
    assert answer_shape(["write_file", "write_file"]) in str(err.value)


def test_a_bad_decision_among_several_is_named_by_its_place_and_tool() -> None:
    names = ["write_file", "run_command"]
    bad_type = {"decisions": [{"type": "approve"}, {"type": "maybe"}]}
    with pytest.raises(ValueError) as err:
        parse_decisions(bad_type, [WRITE, RUN], names)
    assert str(err.value).startswith("decision 2 (run_command): a decision's 'type' must be")
    bad_edit = {"decisions": [edit_decision({"path": 3}), {"type": "approve"}]}
    with pytest.raises(ValueError) as err:
        parse_decisions(bad_edit, [WRITE, RUN], names)
    assert str(err.value).startswith("decision 1 (write_file): Invalid arguments for write_file")
    switched = {"decisions": [{"type": "approve"}, edit_decision(ARGS, "write_file")]}
    with pytest.raises(ValueError, match=r"^decision 2 \(run_command\): an edit cannot switch"):
        parse_decisions(switched, [WRITE, RUN], names)


def test_a_single_decisions_error_has_no_prefix() -> None:
    with pytest.raises(ValueError) as err:
        parse_one({"decisions": [{"type": "maybe"}]})
    assert str(err.value).startswith("a decision's 'type' must be")


def test_an_edited_list_sent_as_json_text_is_parsed_back() -> None:
    # agent-chat-ui's edit form turns every field into text: a list arrives as JSON text.
    answer = edit({"command": '["python3","-c","print(1)"]'}, "run_command")
    decision = parse_one(answer, RUN, "run_command")
    assert decision == ApprovalDecision("edit", args={"command": ["python3", "-c", "print(1)"]})
    # Among several calls too, each against its own tool.
    two = {
        "decisions": [
            {"type": "approve"},
            edit_decision({"command": '["python3", "-c", "print(1)"]'}, "run_command"),
        ]
    }
    assert parse_decisions(two, [WRITE, RUN], ["write_file", "run_command"])[1].args == {
        "command": ["python3", "-c", "print(1)"]
    }


def test_text_is_left_as_text_where_the_tool_wants_text() -> None:
    content = '["not", "a", "list"]'
    decision = parse_one(edit({"path": "a.json", "content": content}))
    assert decision.args == {"path": "a.json", "content": content}


def test_json_text_that_is_not_a_list_is_still_refused() -> None:
    for command in ('"python3"', "python3 -c 'print(1)'", "[1, 2"):
        with pytest.raises(ValueError, match="Invalid arguments for run_command"):
            parse_one(edit({"command": command}, "run_command"), RUN, "run_command")


def test_superseded_answer_is_a_valid_rejection() -> None:
    reject = {"type": "reject", "message": "superseded by a new message"}
    assert superseded_answer() == {"decisions": [reject]}
    assert parse_one(superseded_answer()) == ApprovalDecision(
        "reject", message="superseded by a new message"
    )


def test_superseded_answer_rejects_every_call() -> None:
    answer = superseded_answer(2)
    assert answer == {
        "decisions": [
            {"type": "reject", "message": "superseded by a new message"},
            {"type": "reject", "message": "superseded by a new message"},
        ]
    }
    assert answer["decisions"][0] is not answer["decisions"][1]
    assert (
        parse_decisions(answer, [WRITE, RUN], ["write_file", "run_command"])
        == [ApprovalDecision("reject", message="superseded by a new message")] * 2
    )


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"decision": "approve"}, 'the {"decision": ...} answer is no longer accepted'),
        ({"decision": "edit", "args": ARGS}, "no longer accepted"),
        ("approve", "an approval answer is an object"),
        ({}, "needs 'decisions'"),
        ({"decisions": {"type": "approve"}}, "must be a list"),
        ({"decisions": []}, "must hold exactly 1 (the request asks about one call), not 0"),
        ({"decisions": [{"type": "approve"}, {"type": "approve"}]}, "exactly 1"),
        ({"decisions": [{"type": "approve"}], "extra": 1}, "only 'decisions'"),
        ({"decisions": ["approve"]}, "a decision is an object"),
        ({"decisions": [{"type": "maybe"}]}, "'approve', 'edit' or 'reject', not 'maybe'"),
        ({"decisions": [{"type": "accept"}]}, "not 'accept'"),
        ({"decisions": [{"type": "approve", "args": ARGS}]}, "an 'approve' decision has only"),
        ({"decisions": [{"type": "reject", "message": 3}]}, "message must be a string"),
        ({"decisions": [{"type": "edit"}]}, "needs 'edited_action'"),
        ({"decisions": [{"type": "edit", "edited_action": {"args": ARGS}}]}, "edited_action"),
        (edit([1, 2]), "needs 'edited_action'"),
        (edit(ARGS, name="run_command"), "an edit cannot switch tools"),
    ],
)
def test_an_invalid_answer_says_what_a_valid_one_looks_like(answer: Any, says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_one(answer)
    assert says in str(err.value)
    assert answer_shape(["write_file"]) in str(err.value)


def test_edited_arguments_are_validated_against_the_tool() -> None:
    with pytest.raises(ValueError, match="Invalid arguments for write_file: path:"):
        parse_one(edit({"path": 3}))


def test_without_the_tool_only_its_name_is_checked() -> None:
    assert parse_one(edit({"path": 3}), None).args == {"path": 3}
    with pytest.raises(ValueError, match=r"edited_action\.name must be 'write_file'"):
        parse_one(edit(ARGS, name="edit_file"), None)


@pytest.mark.parametrize("tool", default_tools(), ids=lambda t: t.name)
def test_args_schema_is_the_tools_argument_schema(tool: ToolSpec) -> None:
    (review,) = approval_request([asked(tool)])["review_configs"]
    assert review["args_schema"] == tool.args_schema.model_json_schema()
    assert review["args_schema"]["type"] == "object"
