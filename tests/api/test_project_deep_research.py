"""A deepagents 0.7 project served unchanged from its own ``langgraph.json``
(``tests/projects/deep_research``): ``create_deep_agent`` with a ``researcher`` sub-agent that the
lead reaches through deepagents' ``task`` tool, and ``interrupt_on`` holding ``publish_report``
for a human. Driven by the official SDK against a scripted OpenAI-compatible model; what is
asserted is what LangGraph's own server (``langgraph dev``, langgraph-api 0.16.7) gave for the same
script: the event kinds and namespaces, the HITL request, the states, the run statuses.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.schema import Command

from tests.utils.fake_openai import FakeOpenAIServer, ReplyLike, ToolCall
from tests.utils.projects import (
    Part,
    ProjectCopy,
    copy_project,
    kinds,
    messages_of,
    model_env,
    namespaces,
    parts_of,
    system_prompt,
    updates_in,
)
from tests.utils.runs import sdk_client
from tests.utils.server import serving

GRAPH = "research"
ASK: Any = {"messages": [{"role": "user", "content": "research solar"}]}
APPROVE: Command = {"resume": {"decisions": [{"type": "approve"}]}}
MODES: Any = ["updates", "values"]
SEARCH_RESULT = "3 sources on solar: survey 2021, field study 2023, review 2024."
FINDINGS = "Findings: three sources on solar."
FINAL_TEXT = "Published the solar report."
PUBLISH_ARGS = {"title": "Solar", "summary": "three sources"}

# The events LangGraph's server streamed for this script (stream_subgraphs=True; task ids as
# <id>): the lead's steps, the researcher's steps under the lead's ``tools`` task, the pause.
PAUSE_KINDS = [
    "metadata", "values", "updates", "updates", "values", "updates",
    "values|tools:<id>", "updates|tools:<id>", "updates|tools:<id>", "values|tools:<id>",
    "updates|tools:<id>", "updates|tools:<id>", "values|tools:<id>", "updates|tools:<id>",
    "values|tools:<id>", "updates|tools:<id>",
    "updates", "values", "updates", "values", "updates", "values",
]  # fmt: skip
# The researcher's steps (its updates under ``tools:<id>``): deepagents' middleware around its
# model, its search, its answer.
RESEARCHER_STEPS = [
    ["PatchToolCallsMiddleware.before_agent"], ["model"], ["HumanInTheLoopMiddleware.after_model"],
    ["tools"], ["model"], ["HumanInTheLoopMiddleware.after_model"],
]  # fmt: skip
APPROVED_KINDS = [
    "metadata", "values", "updates", "values", "updates", "values", "updates", "values",
    "updates", "updates",
]  # fmt: skip


def script(request: dict[str, Any]) -> ReplyLike:
    """The model's turn, from the conversation so far (a repeated call is answered the same
    way): the researcher searches, then reports; the lead delegates, then publishes, then says
    so."""
    done = sum(1 for m in request["messages"] if m.get("role") == "tool")
    if system_prompt(request).startswith("You are the researcher"):
        return ToolCall("search_sources", {"topic": "solar"}) if not done else FINDINGS
    if not done:
        return ToolCall(
            "task", {"description": "Find sources on solar", "subagent_type": "researcher"}
        )
    return ToolCall("publish_report", PUBLISH_ARGS) if done == 1 else FINAL_TEXT


def project_for(root: Path, model: FakeOpenAIServer, search_delay: float) -> ProjectCopy:
    project = copy_project("deep_research", root)
    write_env(project, model, search_delay)
    return project


def write_env(project: ProjectCopy, model: FakeOpenAIServer, search_delay: float) -> None:
    project.write_env(
        {
            **model_env(model),
            "DEEP_RESEARCH_LEDGER": str(project.ledger),
            "DEEP_RESEARCH_SEARCH_DELAY": str(search_delay),
        }
    )


def check_hitl_request(interrupts: list[dict[str, Any]]) -> None:
    [one] = interrupts
    [action] = one["value"]["action_requests"]
    assert (action["name"], action["args"]) == ("publish_report", PUBLISH_ARGS)
    [review] = one["value"]["review_configs"]
    assert review["action_name"] == "publish_report"
    assert set(review["allowed_decisions"]) == {"approve", "edit", "reject", "respond"}


@dataclass
class Research:
    """What the SDK saw of one run that paused at the publish and one that approved it."""

    paused: list[Part] = field(default_factory=list)
    approved: list[Part] = field(default_factory=list)
    paused_thread: dict[str, Any] = field(default_factory=dict)
    paused_state: dict[str, Any] = field(default_factory=dict)
    final_thread: dict[str, Any] = field(default_factory=dict)
    final_state: dict[str, Any] = field(default_factory=dict)
    statuses: list[list[str]] = field(default_factory=list)
    """Run statuses after the pause, then after the approval."""
    ledger_at_pause: list[str] = field(default_factory=list)
    ledger: list[str] = field(default_factory=list)
    model_calls: int = 0
    log: str = ""


async def research_and_approve(url: str, project: ProjectCopy, model: Any) -> Research:
    seen = Research()
    async with sdk_client(url) as client:
        thread = (await client.threads.create())["thread_id"]
        seen.paused = await parts_of(
            client.runs.stream(thread, GRAPH, input=ASK, stream_mode=MODES, stream_subgraphs=True)
        )
        seen.paused_thread = await client.threads.get(thread)
        seen.paused_state = await client.threads.get_state(thread)
        seen.statuses.append([r["status"] for r in await client.runs.list(thread)])
        seen.ledger_at_pause = project.ledger_lines()
        seen.approved = await parts_of(
            client.runs.stream(
                thread, GRAPH, command=APPROVE, stream_mode=MODES, stream_subgraphs=True
            )
        )
        seen.final_thread = await client.threads.get(thread)
        seen.final_state = await client.threads.get_state(thread)
        seen.statuses.append([r["status"] for r in await client.runs.list(thread)])
    seen.ledger, seen.model_calls = project.ledger_lines(), len(model.requests)
    return seen


@pytest.fixture(scope="module")
def research(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Research:
    root = tmp_path_factory.mktemp("research")
    with FakeOpenAIServer(responder=script) as model:
        project = project_for(root, model, search_delay=0)
        with serving(project.server(module_database_url)) as proc:
            seen = asyncio.run(research_and_approve(proc.url, project, model))
            seen.log = proc.log_path.read_text(errors="replace")
    return seen


def test_the_lead_delegates_and_the_researchers_events_carry_its_namespace(
    research: Research,
) -> None:
    assert "Traceback" not in research.log, research.log
    assert kinds(research.paused) == PAUSE_KINDS
    # One sub-agent run, named by the lead's ``tools`` task that ran the ``task`` tool.
    [ns] = namespaces(research.paused, "tools")
    sub = updates_in(research.paused, ns)
    assert [list(u) for u in sub] == RESEARCHER_STEPS
    asked, answered = [m for u in sub for m in messages_of(u, "model")]
    [call] = asked["tool_calls"]
    assert (call["name"], call["args"]) == ("search_sources", {"topic": "solar"})
    assert answered["content"] == FINDINGS and not answered["tool_calls"]
    [searched] = [messages_of(u, "tools") for u in sub if "tools" in u]
    assert [(m["name"], m["content"]) for m in searched] == [("search_sources", SEARCH_RESULT)]
    # The lead's own updates carry no namespace: its ``task`` result is the researcher's answer.
    [delegated] = [messages_of(u, "tools") for u in updates_in(research.paused) if "tools" in u]
    assert [(m["name"], m["content"]) for m in delegated] == [("task", FINDINGS)]
    assert research.ledger_at_pause == ["search-start solar", "search-done solar"]


def test_the_publish_waits_for_a_human(research: Research) -> None:
    [pause] = [u for u in updates_in(research.paused) if "__interrupt__" in u]
    check_hitl_request(pause["__interrupt__"])
    last_values = [data for event, data in research.paused if event == "values"][-1]
    check_hitl_request(last_values["__interrupt__"])
    # The thread waits; the run did all it could (LangGraph: success).
    assert research.paused_thread["status"] == "interrupted"
    [waiting] = research.paused_thread["interrupts"].values()
    check_hitl_request(waiting)
    check_hitl_request(research.paused_state["interrupts"])
    assert research.paused_state["next"] == ["HumanInTheLoopMiddleware.after_model"]
    assert research.paused_thread["values"] == research.paused_state["values"]
    assert research.statuses[0] == ["success"]


def test_the_approved_report_is_published_once(research: Research) -> None:
    assert kinds(research.approved) == APPROVED_KINDS
    messages = research.final_state["values"]["messages"]
    assert [(m["type"], m.get("name")) for m in messages] == [
        ("human", None),
        ("ai", None),
        ("tool", "task"),
        ("ai", None),
        ("tool", "publish_report"),
        ("ai", None),
    ]
    assert messages[2]["content"] == FINDINGS
    assert messages[4]["content"] == "Published 'Solar'."
    assert messages[-1]["content"] == FINAL_TEXT
    assert research.final_thread["status"] == "idle"
    assert not research.final_state["next"] and not research.final_state["interrupts"]
    assert research.statuses[1] == ["success", "success"]
    assert research.ledger == ["search-start solar", "search-done solar", "publish Solar"]
    # lead: delegate, publish, answer; researcher: search, report.
    assert research.model_calls == 5


# -- killed in the researcher's slow search, and again while the publish waits -----------------


@pytest.mark.slow
async def test_killed_in_the_sub_agents_tool_and_at_the_approval_nothing_runs_twice(
    database_url: str, tmp_path: Path
) -> None:
    async with FakeOpenAIServer(responder=script) as model:
        project = project_for(tmp_path, model, search_delay=60)
        proc = project.server(database_url)
        try:
            await asyncio.to_thread(proc.start)
            async with sdk_client(proc.url) as client:
                thread = (await client.threads.create())["thread_id"]
                run = await client.runs.create(
                    thread, GRAPH, input=ASK, stream_mode=MODES, stream_subgraphs=True
                )
                await project.wait_for_line("search-start solar")
            proc.kill()
            write_env(project, model, search_delay=0)  # the restarted server reads it again
            await asyncio.to_thread(proc.start)
            async with sdk_client(proc.url) as client:
                paused: Any = await client.runs.join(thread, run["run_id"])
                check_hitl_request(paused["__interrupt__"])
                assert (await client.threads.get(thread))["status"] == "interrupted"
                assert (await client.runs.get(thread, run["run_id"]))["status"] == "success"
                replay = await parts_of(
                    client.runs.join_stream(thread, run["run_id"], last_event_id="-1")
                )
            # The lead's delegation and the researcher's first turn were checkpointed (the
            # researcher's in its own namespace): only the search ran again, and what came after.
            assert project.ledger_lines() == [
                "search-start solar",
                "search-start solar",
                "search-done solar",
            ]
            assert len(model.requests) == 4
            # Each of the researcher's steps is in the run's stream once, those before the kill
            # too (stored with their checkpoints).
            [ns] = namespaces(replay, "tools")
            assert [list(u) for u in updates_in(replay, ns)] == RESEARCHER_STEPS
            assert [e for e, _ in replay].count("end") == 1

            # Killed again while it waits: the approval resumes it on the restarted server.
            await asyncio.to_thread(proc.restart)
            async with sdk_client(proc.url) as client:
                final: Any = await client.runs.wait(thread, GRAPH, command=APPROVE)
                thread_after = await client.threads.get(thread)
        finally:
            proc.stop()
    assert final["messages"][-1]["content"] == FINAL_TEXT
    assert [m["type"] for m in final["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert thread_after["status"] == "idle"
    assert project.ledger_lines() == [
        "search-start solar",
        "search-start solar",
        "search-done solar",
        "publish Solar",
    ]
    assert len(model.requests) == 5
    assert "Traceback" not in proc.log_path.read_text(errors="replace")
