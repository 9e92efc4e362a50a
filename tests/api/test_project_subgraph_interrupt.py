"""A LangGraph project served unchanged from its own ``langgraph.json``
(``tests/projects/subgraph_interrupt``): a parent graph whose ``review`` node is a compiled
subgraph that reports progress with ``get_stream_writer()`` and asks a human with
``interrupt()``. Driven by the official SDK; what is asserted is what LangGraph's own server
(``langgraph dev``, langgraph-api 0.16.7) gave: the events with their namespaces, the paused
thread and its subgraph's state, the run statuses, the resume, the replay after an event id.

One difference is deliberate: with ``stream_subgraphs=True`` LangGraph's server records the
*subgraph's* values (and its inner task id) on the paused thread (``GET /threads/{id}``: the last
checkpoint its stream saw), while its ``/state`` shows the parent's; threadline's thread shows the
parent's state whatever the run streamed, as LangGraph's does without ``stream_subgraphs``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.utils.projects import (
    Part,
    ProjectCopy,
    copy_project,
    kinds,
    namespaces,
    parts_of,
)
from tests.utils.runs import sdk_client
from tests.utils.server import serving

GRAPH = "review"
TOPIC = "tides"
DRAFT = "A short note on tides."
QUESTION = {"question": "Publish this draft?", "draft": DRAFT}
MODES: Any = ["updates", "custom", "values"]
PAUSED = {"topic": TOPIC, "log": ["prepared"]}
FINAL = {"topic": TOPIC, "draft": DRAFT, "verdict": "yes", "log": ["prepared", "published (yes)"]}

# LangGraph's server, for this graph (stream_subgraphs=True, task ids as <id>, interrupt ids left
# out): the parent's steps, the subgraph's under ``review:<id>``, the pause in both.
PAUSE_EVENTS: list[Part] = [
    ("values", {"topic": TOPIC, "log": []}),
    ("updates", {"prepare": {"log": ["prepared"]}}),
    ("values", PAUSED),
    ("values|review:<id>", {"topic": TOPIC}),
    ("custom|review:<id>", {"progress": "drafting", "topic": TOPIC}),
    ("custom|review:<id>", {"progress": "drafted", "words": 5}),
    ("updates|review:<id>", {"draft": {"draft": DRAFT}}),
    ("values|review:<id>", {"topic": TOPIC, "draft": DRAFT}),
    ("custom|review:<id>", {"progress": "awaiting review"}),
    ("updates|review:<id>", {"__interrupt__": [{"value": QUESTION}]}),
    (
        "values|review:<id>",
        {"topic": TOPIC, "draft": DRAFT, "__interrupt__": [{"value": QUESTION}]},
    ),
    ("updates", {"__interrupt__": [{"value": QUESTION}]}),
    ("values", {**PAUSED, "__interrupt__": [{"value": QUESTION}]}),
]
RESUME_EVENTS: list[Part] = [
    ("values", PAUSED),
    ("values|review:<id>", {"topic": TOPIC, "draft": DRAFT}),
    ("custom|review:<id>", {"progress": "awaiting review"}),  # the node runs again from the top
    ("updates|review:<id>", {"approve": {"verdict": "yes"}}),
    ("values|review:<id>", {"topic": TOPIC, "draft": DRAFT, "verdict": "yes"}),
    ("updates", {"review": {"topic": TOPIC, "draft": DRAFT, "verdict": "yes"}}),
    ("values", {"topic": TOPIC, "draft": DRAFT, "verdict": "yes", "log": ["prepared"]}),
    ("updates", {"publish": {"log": ["published (yes)"]}}),
    ("values", FINAL),
]
LEDGER = ["prepare tides", "draft-start tides", "draft-done tides", "verdict yes", "publish yes"]


def project_for(root: Path, draft_delay: float) -> ProjectCopy:
    project = copy_project("subgraph_interrupt", root)
    write_env(project, draft_delay)
    return project


def write_env(project: ProjectCopy, draft_delay: float) -> None:
    project.write_env(
        {"REVIEW_FLOW_LEDGER": str(project.ledger), "REVIEW_FLOW_DRAFT_DELAY": str(draft_delay)}
    )


def comparable(parts: list[Part]) -> list[Part]:
    """Events as LangGraph's were recorded above: no ``metadata`` or ``end``, task ids as <id>,
    interrupts by their value (their ids are hashes of the run's checkpoint ids)."""

    def plain(data: Any) -> Any:
        if isinstance(data, dict) and "__interrupt__" in data:
            return {**data, "__interrupt__": [{"value": i["value"]} for i in data["__interrupt__"]]}
        return data

    kept = [part for part in parts if part[0] != "end"]
    return [
        (kind, plain(data))
        for kind, (event, data) in zip(kinds(kept), kept, strict=True)
        if event != "metadata"
    ]


@dataclass
class Review:
    """What the SDK saw of a run that paused in the subgraph and one that resumed it."""

    paused: list[Any] = field(default_factory=list)
    thread: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    nested: dict[str, Any] = field(default_factory=dict)
    """``GET /threads/{id}/state?subgraphs=true`` at the pause."""
    replayed: list[Part] = field(default_factory=list)
    """The paused run's events after its fourth one (``Last-Event-ID``)."""
    resumed: list[Any] = field(default_factory=list)
    rest: list[Part] = field(default_factory=list)
    """The resuming run's events after its third one (``Last-Event-ID``), once it ended."""
    final: dict[str, Any] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)
    ledger: list[str] = field(default_factory=list)


async def pause_and_resume(url: str, project: ProjectCopy) -> Review:
    seen = Review()
    async with sdk_client(url) as client:
        thread = (await client.threads.create())["thread_id"]
        stream = client.runs.stream(
            thread,
            GRAPH,
            input={"topic": TOPIC, "log": []},
            stream_mode=MODES,
            stream_subgraphs=True,
            stream_resumable=True,
        )
        seen.paused = [part async for part in stream]
        seen.thread = await client.threads.get(thread)
        seen.state = await client.threads.get_state(thread)
        seen.nested = await client.threads.get_state(thread, subgraphs=True)
        [paused_run] = await client.runs.list(thread)
        seen.replayed = await parts_of(
            client.runs.join_stream(thread, paused_run["run_id"], last_event_id=seen.paused[3].id)
        )
        run = await client.runs.create(
            thread,
            GRAPH,
            command={"resume": "yes"},
            stream_mode=MODES,
            stream_subgraphs=True,
            stream_resumable=True,
        )
        join = client.runs.join_stream(thread, run["run_id"], last_event_id="-1")
        seen.resumed = [part async for part in join]
        seen.rest = await parts_of(
            client.runs.join_stream(thread, run["run_id"], last_event_id=seen.resumed[2].id)
        )
        seen.final = await client.threads.get_state(thread)
        seen.statuses = [r["status"] for r in await client.runs.list(thread)]
    seen.ledger = project.ledger_lines()
    return seen


@pytest.fixture(scope="module")
def review(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Review:
    project = project_for(tmp_path_factory.mktemp("review"), draft_delay=0)
    with serving(project.server(module_database_url)) as proc:
        return asyncio.run(pause_and_resume(proc.url, project))


def as_parts(parts: list[Any]) -> list[Part]:
    return [(part.event, part.data) for part in parts]


def test_the_subgraphs_progress_and_question_stream_under_its_namespace(review: Review) -> None:
    parts = as_parts(review.paused)
    assert parts[0][0] == "metadata"
    assert comparable(parts) == PAUSE_EVENTS
    [ns] = namespaces(parts, "review")
    assert ns.removeprefix("review:") == review.state["tasks"][0]["id"]


def test_the_thread_waits_with_the_subgraphs_question(review: Review) -> None:
    assert review.thread["status"] == "interrupted"
    [(task_id, [asked])] = review.thread["interrupts"].items()
    assert asked["value"] == QUESTION
    assert review.thread["values"] == review.state["values"] == PAUSED
    assert review.state["next"] == ["review"]
    [task] = review.state["tasks"]
    assert (task["id"], task["name"]) == (task_id, "review")
    assert [i["value"] for i in task["interrupts"]] == [QUESTION]
    assert [i["value"] for i in review.state["interrupts"]] == [QUESTION]
    assert task["state"] is None  # without ?subgraphs=true, as LangGraph's
    # The run did all it could: LangGraph's status for a run that paused.
    assert review.statuses[-1] == "success"


def test_the_state_with_subgraphs_shows_the_subgraphs_own(review: Review) -> None:
    [task] = review.nested["tasks"]
    inner = task["state"]
    assert inner["next"] == ["approve"]
    assert inner["values"] == {"topic": TOPIC, "draft": DRAFT}
    assert inner["checkpoint"]["checkpoint_ns"] == f"review:{task['id']}"
    [waiting] = inner["tasks"]
    assert waiting["name"] == "approve"
    assert [i["value"] for i in waiting["interrupts"]] == [QUESTION]


def test_a_replay_after_an_event_id_returns_the_rest(review: Review) -> None:
    assert review.replayed == as_parts(review.paused)[4:]
    assert review.rest == as_parts(review.resumed)[3:]


def test_the_resume_finishes_the_subgraph_then_the_parent(review: Review) -> None:
    parts = as_parts(review.resumed)
    assert comparable(parts) == RESUME_EVENTS
    assert review.final["values"] == FINAL
    assert not review.final["next"] and not review.final["interrupts"]
    assert review.statuses == ["success", "success"]
    assert review.ledger == LEDGER


@pytest.mark.slow
async def test_killed_in_the_subgraphs_slow_step_nothing_done_runs_twice(
    database_url: str, tmp_path: Path
) -> None:
    project = project_for(tmp_path, draft_delay=60)
    proc = project.server(database_url)
    try:
        await asyncio.to_thread(proc.start)
        async with sdk_client(proc.url) as client:
            thread = (await client.threads.create())["thread_id"]
            run = await client.runs.create(
                thread,
                GRAPH,
                input={"topic": TOPIC, "log": []},
                stream_mode=MODES,
                stream_subgraphs=True,
            )
            await project.wait_for_line("draft-start tides")
        proc.kill()
        write_env(project, draft_delay=0)  # the restarted server reads it again
        await asyncio.to_thread(proc.start)
        async with sdk_client(proc.url) as client:
            paused: Any = await client.runs.join(thread, run["run_id"])
            assert [i["value"] for i in paused["__interrupt__"]] == [QUESTION]
            assert (await client.threads.get(thread))["status"] == "interrupted"
            assert (await client.runs.get(thread, run["run_id"]))["status"] == "success"
            replay = await parts_of(
                client.runs.join_stream(thread, run["run_id"], last_event_id="-1")
            )
            final: Any = await client.runs.wait(thread, GRAPH, command={"resume": "yes"})
    finally:
        proc.stop()
    # The draft started again (it was killed in the middle); nothing that finished ran again.
    assert project.ledger_lines() == ["prepare tides", "draft-start tides", *LEDGER[1:]]
    assert final == FINAL
    # Each update is in the run's stream once, the subgraph's finished draft too; the draft's
    # start was reported by both attempts (it started twice).
    events = comparable(replay)
    assert [e for e in events if e[0].startswith("updates")] == [
        e for e in PAUSE_EVENTS if e[0].startswith("updates")
    ]
    assert events.count(("custom|review:<id>", {"progress": "drafted", "words": 5})) == 1
    assert len(namespaces(replay, "review")) == 1
    assert "Traceback" not in proc.log_path.read_text(errors="replace")
