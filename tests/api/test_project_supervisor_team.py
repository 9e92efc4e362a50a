"""A ``langgraph-supervisor`` project served unchanged from its own ``langgraph.json``
(``tests/projects/supervisor_team``): ``create_supervisor`` over a researcher (LangChain v1
``create_agent``) and an analyst (LangGraph's ``create_react_agent``). Driven by the official SDK
against a scripted OpenAI-compatible model with ``stream_subgraphs=True``; what is asserted is what
LangGraph's own server (``langgraph dev``, langgraph-api 0.16.7) gave for the same script: each
agent's updates, values and message tokens under its namespace (``messages|researcher:<id>``),
``messages`` mode's partials without one, the final conversation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.utils.fake_openai import FakeOpenAIServer, ReplyLike, ToolCall
from tests.utils.projects import (
    Part,
    ProjectCopy,
    copy_project,
    kinds,
    model_env,
    namespaces,
    parts_of,
    system_prompt,
    tools_called,
    updates_in,
)
from tests.utils.runs import sdk_client
from tests.utils.server import serving

GRAPH = "team"
ASK: Any = {"messages": [{"role": "user", "content": "How fast did Lyon grow?"}]}
FIGURES = "Lyon: 480000 in 2010, 522000 in 2020."
GROWTH = "Lyon grew 8.8% from 2010 to 2020."
FINAL_TEXT = "Lyon grew by 8.8% between 2010 and 2020."
TUPLES: Any = ["updates", "messages-tuple", "values"]
PARTIALS: Any = ["updates", "messages", "values"]
LEDGER_ONE_RUN = ["lookup-start Lyon", "lookup-done Lyon", "growth 480000 522000"]

# LangGraph's server, for this script: the graph's own steps (supervisor, researcher, supervisor,
# analyst, supervisor), each agent's steps under its namespace. ``messages`` events aside.
STATE_KINDS = [
    "metadata", "values",
    "values|supervisor:<id>", "updates|supervisor:<id>", "values|supervisor:<id>",
    "updates", "values",
    "values|researcher:<id>", "updates|researcher:<id>", "values|researcher:<id>",
    "updates|researcher:<id>", "values|researcher:<id>", "updates|researcher:<id>",
    "values|researcher:<id>",
    "updates", "values",
    "values|supervisor:<id>", "updates|supervisor:<id>", "values|supervisor:<id>",
    "updates", "values",
    "values|analyst:<id>", "updates|analyst:<id>", "values|analyst:<id>",
    "updates|analyst:<id>", "values|analyst:<id>", "updates|analyst:<id>", "values|analyst:<id>",
    "updates", "values",
    "values|supervisor:<id>", "updates|supervisor:<id>", "values|supervisor:<id>",
    "updates", "values",
]  # fmt: skip
TEAM_STEPS = [["supervisor"], ["researcher"], ["supervisor"], ["analyst"], ["supervisor"]]
"""The graph's own updates: who had the turn."""
# (event, node, message type) of the ``messages-tuple`` events, in order of first arrival: each
# agent's model streams chunks under its namespace; a worker's result reaches the graph's own.
TUPLE_SOURCES = [
    ("messages|supervisor:<id>", "agent", "AIMessageChunk"),
    ("messages|researcher:<id>", "model", "AIMessageChunk"),
    ("messages|researcher:<id>", "tools", "tool"),
    ("messages", "researcher", "ai"),
    ("messages", "researcher", "tool"),
    ("messages|analyst:<id>", "agent", "AIMessageChunk"),
    ("messages|analyst:<id>", "tools", "tool"),
    ("messages", "analyst", "ai"),
    ("messages", "analyst", "tool"),
]
FINAL_MESSAGES = [
    ("human", None, ASK["messages"][0]["content"]),
    ("ai", "supervisor", ""),
    ("tool", "transfer_to_researcher", "Successfully transferred to researcher"),
    ("ai", "researcher", FIGURES),
    ("ai", "researcher", "Transferring back to supervisor"),
    ("tool", "transfer_back_to_supervisor", "Successfully transferred back to supervisor"),
    ("ai", "supervisor", ""),
    ("tool", "transfer_to_analyst", "Successfully transferred to analyst"),
    ("ai", "analyst", GROWTH),
    ("ai", "analyst", "Transferring back to supervisor"),
    ("tool", "transfer_back_to_supervisor", "Successfully transferred back to supervisor"),
    ("ai", "supervisor", FINAL_TEXT),
]


def script(request: dict[str, Any]) -> ReplyLike:
    """Each agent's turn, from its prompt and the calls the conversation holds (a repeated call
    is answered the same way): the supervisor hands off to the researcher, then the analyst,
    then answers; each worker calls its tool once, then reports."""
    system, called = system_prompt(request), tools_called(request)
    if system.startswith("You are the researcher"):
        if "lookup_population" not in called:
            return ToolCall("lookup_population", {"city": "Lyon"})
        return FIGURES
    if system.startswith("You are the analyst"):
        if "growth_rate" not in called:
            return ToolCall("growth_rate", {"before": 480000, "after": 522000})
        return GROWTH
    for worker in ("researcher", "analyst"):
        if f"transfer_to_{worker}" not in called:
            return ToolCall(f"transfer_to_{worker}", {})
    return FINAL_TEXT


def project_for(root: Path, model: FakeOpenAIServer, lookup_delay: float) -> ProjectCopy:
    project = copy_project("supervisor_team", root)
    write_env(project, model, lookup_delay)
    return project


def write_env(project: ProjectCopy, model: FakeOpenAIServer, lookup_delay: float) -> None:
    project.write_env(
        {
            **model_env(model),
            "SUPERVISOR_TEAM_LEDGER": str(project.ledger),
            "SUPERVISOR_TEAM_LOOKUP_DELAY": str(lookup_delay),
        }
    )


def final_messages(values: dict[str, Any]) -> list[tuple[str, str | None, Any]]:
    return [(m["type"], m.get("name"), m["content"]) for m in values["messages"]]


@dataclass
class Team:
    """What the SDK saw of one question streamed with each ``messages`` flavour."""

    parts: dict[str, list[Part]] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    threads: dict[str, dict[str, Any]] = field(default_factory=dict)
    statuses: dict[str, list[str]] = field(default_factory=dict)
    ledger: list[str] = field(default_factory=list)
    model_calls: int = 0
    log: str = ""


async def ask_twice(url: str) -> Team:
    seen = Team()
    async with sdk_client(url) as client:
        for modes in (TUPLES, PARTIALS):
            key = modes[1]
            thread = (await client.threads.create())["thread_id"]
            seen.parts[key] = await parts_of(
                client.runs.stream(
                    thread, GRAPH, input=ASK, stream_mode=modes, stream_subgraphs=True
                )
            )
            seen.states[key] = await client.threads.get_state(thread)
            seen.threads[key] = await client.threads.get(thread)
            seen.statuses[key] = [r["status"] for r in await client.runs.list(thread)]
    return seen


@pytest.fixture(scope="module")
def team(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Team:
    root = tmp_path_factory.mktemp("team")
    with FakeOpenAIServer(responder=script) as model:
        project = project_for(root, model, lookup_delay=0)
        with serving(project.server(module_database_url)) as proc:
            seen = asyncio.run(ask_twice(proc.url))
            seen.log = proc.log_path.read_text(errors="replace")
        seen.ledger, seen.model_calls = project.ledger_lines(), len(model.requests)
    return seen


def without_messages(parts: list[Part]) -> list[Part]:
    return [(event, data) for event, data in parts if not event.startswith("messages")]


def test_each_agents_updates_come_under_its_namespace(team: Team) -> None:
    assert "Traceback" not in team.log, team.log
    for key in ("messages-tuple", "messages"):
        parts = without_messages(team.parts[key])
        assert kinds(parts) == STATE_KINDS, key
        # The supervisor is a subgraph run three times: a namespace (task) each time.
        assert len(namespaces(parts, "supervisor")) == 3
        [researcher] = namespaces(parts, "researcher")
        [analyst] = namespaces(parts, "analyst")
        # create_agent's nodes are model/tools; create_react_agent's agent/tools.
        assert [list(u) for u in updates_in(parts, researcher)] == [["model"], ["tools"], ["model"]]
        assert [list(u) for u in updates_in(parts, analyst)] == [["agent"], ["tools"], ["agent"]]
        [looked_up] = updates_in(parts, researcher)[1]["tools"]["messages"]
        assert looked_up["content"] == FIGURES
        assert [list(u) for u in updates_in(parts)] == TEAM_STEPS


def test_message_tokens_come_under_their_agents_namespace(team: Team) -> None:
    parts = [(e, d) for e, d in team.parts["messages-tuple"] if e.startswith("messages")]
    sources: list[tuple[str, str, str]] = []
    for kind, (event, (message, metadata)) in zip(kinds(parts), parts, strict=True):
        source = (kind, metadata["langgraph_node"], message["type"])
        if source not in sources:
            sources.append(source)
        if "|" in event:  # the namespace is where the message was made
            assert metadata["langgraph_checkpoint_ns"].startswith(event.split("|", 1)[1])
    assert sources == TUPLE_SOURCES
    # The researcher's answer streamed token by token.
    [researcher] = namespaces(parts, "researcher")
    chunks = [m for e, (m, _) in parts if e == f"messages|{researcher}" and m["type"] != "tool"]
    texts = [m["content"] for m in chunks if m["content"]]
    assert len(texts) > 1 and "".join(texts) == FIGURES


def test_messages_mode_accumulates_without_namespaces(team: Team) -> None:
    """LangGraph's ``messages`` mode: ``messages/metadata`` once per message id, then the
    message so far (``messages/partial``, ``messages/complete``), for subgraphs' messages too
    and named without their namespace."""
    parts = [(e, d) for e, d in team.parts["messages"] if e.startswith("messages")]
    assert {e for e, _ in parts} == {"messages/metadata", "messages/partial", "messages/complete"}
    ids = [next(iter(data)) for event, data in parts if event == "messages/metadata"]
    assert len(ids) == len(set(ids)) == 13
    last: dict[str, Any] = {}
    for event, data in parts:
        if event != "messages/metadata":
            [message] = data
            last[message["id"]] = message
    texts = [m["content"] for m in last.values()]
    for text in (FIGURES, GROWTH, FINAL_TEXT):
        assert text in texts


def test_the_conversation_ends_as_langgraph_ends_it(team: Team) -> None:
    for key in ("messages-tuple", "messages"):
        assert final_messages(team.states[key]["values"]) == FINAL_MESSAGES
        assert not team.states[key]["next"]
        assert team.threads[key]["status"] == "idle"
        assert team.statuses[key] == ["success"]
        last_values = [d for e, d in team.parts[key] if e == "values"][-1]
        assert final_messages(last_values) == FINAL_MESSAGES
    assert team.ledger == LEDGER_ONE_RUN * 2
    # Per question: the supervisor three times, each worker twice.
    assert team.model_calls == 7 * 2


@pytest.mark.slow
async def test_killed_in_a_workers_tool_nothing_runs_twice(
    database_url: str, tmp_path: Path
) -> None:
    async with FakeOpenAIServer(responder=script) as model:
        project = project_for(tmp_path, model, lookup_delay=60)
        proc = project.server(database_url)
        try:
            await asyncio.to_thread(proc.start)
            async with sdk_client(proc.url) as client:
                thread = (await client.threads.create())["thread_id"]
                run = await client.runs.create(
                    thread, GRAPH, input=ASK, stream_mode=TUPLES, stream_subgraphs=True
                )
                await project.wait_for_line("lookup-start Lyon")
            assert len(model.requests) == 2  # the supervisor's handoff, the researcher's call
            proc.kill()
            write_env(project, model, lookup_delay=0)  # the restarted server reads it again
            await asyncio.to_thread(proc.start)
            async with sdk_client(proc.url) as client:
                final: Any = await client.runs.join(thread, run["run_id"])
                state = await client.threads.get_state(thread)
                status = (await client.runs.get(thread, run["run_id"]))["status"]
                replay = await parts_of(
                    client.runs.join_stream(thread, run["run_id"], last_event_id="-1")
                )
        finally:
            proc.stop()
    assert status == "success"
    assert final_messages(final) == FINAL_MESSAGES
    assert final_messages(state["values"]) == FINAL_MESSAGES
    # The lookup started again (it was killed in the middle); nothing that finished ran again.
    assert project.ledger_lines() == ["lookup-start Lyon", *LEDGER_ONE_RUN]
    assert len(model.requests) == 7
    # Each agent step's update is in the run's stream once, the researcher's too.
    parts = without_messages(replay)
    [researcher] = namespaces(parts, "researcher")
    assert [list(u) for u in updates_in(parts, researcher)] == [["model"], ["tools"], ["model"]]
    assert [list(u) for u in updates_in(parts)] == TEAM_STEPS
    assert "Traceback" not in proc.log_path.read_text(errors="replace")
