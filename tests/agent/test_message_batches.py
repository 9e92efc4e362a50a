"""``add_messages_batch`` in one pass equals ``add_messages`` folded over the writes: on random
batches of appends, replacements, removals (within a write and across writes), REMOVE_ALL with
duplicate ids after it, dicts and bare messages; the same errors; and batching invariance."""

from __future__ import annotations

import random
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from agent.message_batches import add_messages_batch


def fold(left: list[Any], writes: list[Any]) -> list[Any]:
    merged: Any = left
    for write in writes:
        merged = add_messages(merged, write)
    return list(merged)


def shape(messages: list[Any]) -> list[tuple[str, str | None, Any]]:
    return [(type(m).__name__, m.id, m.content) for m in messages]


def message(rng: random.Random, message_id: str) -> Any:
    kind = rng.randrange(4)
    text = f"t{rng.randrange(1000)}"
    if kind == 0:
        return HumanMessage(content=text, id=message_id)
    if kind == 1:
        return AIMessage(content=text, id=message_id)
    if kind == 2:
        return ToolMessage(content=text, tool_call_id="c", id=message_id)
    return {"role": "user", "content": text, "id": message_id}


def random_case(rng: random.Random) -> tuple[list[Any], list[Any]]:
    ids = [f"m{i}" for i in range(12)]
    left = [message(rng, i) for i in rng.sample(ids, rng.randrange(0, 8))]
    left = [
        HumanMessage(content=m["content"], id=m["id"]) if isinstance(m, dict) else m for m in left
    ]
    present = {m.id for m in left}
    writes: list[Any] = []
    for _ in range(rng.randrange(1, 7)):
        write: list[Any] = []
        removed: set[str] = set()
        for _ in range(rng.randrange(0, 5)):
            roll = rng.random()
            known = sorted(present - removed)
            if roll < 0.2 and known:
                target = rng.choice(known)
                write.append(RemoveMessage(id=target))
                removed.add(target)
            elif roll < 0.27:
                write.append(RemoveMessage(id=REMOVE_ALL_MESSAGES))
                present, removed = set(), set()
            else:
                chosen = rng.choice(ids)
                write.append(message(rng, chosen))
                present.add(chosen)
                removed.discard(chosen)
        present -= removed
        writes.append(write[0] if len(write) == 1 and rng.random() < 0.3 else write)
    return left, writes


def copy_case(left: list[Any], writes: list[Any]) -> tuple[list[Any], list[Any]]:
    def one(m: Any) -> Any:
        return dict(m) if isinstance(m, dict) else m.model_copy()

    return [one(m) for m in left], [
        [one(m) for m in w] if isinstance(w, list) else one(w) for w in writes
    ]


@pytest.mark.parametrize("seed", range(400))
def test_equals_the_fold(seed: int) -> None:
    rng = random.Random(seed)
    left, writes = random_case(rng)
    expected_error = got_error = None
    try:
        expected = shape(fold(*copy_case(left, writes)))
    except ValueError as e:
        expected_error = str(e)
    try:
        got = shape(add_messages_batch(*copy_case(left, writes)))
    except ValueError as e:
        got_error = str(e)
    assert got_error == expected_error
    if expected_error is None:
        assert got == expected


@pytest.mark.parametrize("seed", range(100))
def test_batching_invariant(seed: int) -> None:
    rng = random.Random(1000 + seed)
    left, writes = random_case(rng)
    cut = rng.randrange(len(writes) + 1)
    try:
        whole = shape(add_messages_batch(*copy_case(left, writes)))
    except ValueError:
        return
    a_left, a_writes = copy_case(left, writes)
    in_two = add_messages_batch(add_messages_batch(a_left, a_writes[:cut]), a_writes[cut:])
    assert shape(in_two) == whole


def test_the_cases_the_random_ones_must_cover() -> None:
    a, b, c = (HumanMessage(content=x, id=x) for x in "abc")
    # removed then re-added in one write: in place; across two writes: at the end
    assert shape(add_messages_batch([a, b, c], [[RemoveMessage(id="a"), a]])) == shape([a, b, c])
    assert shape(add_messages_batch([a, b, c], [[RemoveMessage(id="a")], [a]])) == shape([b, c, a])
    # after REMOVE_ALL a write's tail is kept as it is, duplicates too; a removal takes both
    tail = [RemoveMessage(id=REMOVE_ALL_MESSAGES), a, a.model_copy(), b]
    assert shape(add_messages_batch([c], [tail])) == shape([a, a, b])
    assert shape(add_messages_batch([c], [tail, [RemoveMessage(id="a")]])) == shape([b])
    assert shape(fold([c], [tail, [RemoveMessage(id="a")]])) == shape([b])
    with pytest.raises(ValueError, match="doesn't exist"):
        add_messages_batch([a], [[RemoveMessage(id="zz")]])
    # missing ids are given, dicts coerced, a bare message is a write
    out = add_messages_batch([], [{"role": "user", "content": "x"}, AIMessage(content="y")])
    assert [type(m) for m in out] == [HumanMessage, AIMessage] and all(m.id for m in out)
