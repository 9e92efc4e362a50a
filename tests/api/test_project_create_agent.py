"""A LangChain v1 ``create_agent`` project served unchanged from its own ``langgraph.json``
(``tests/projects/support_agent``): a run ``context`` its tools read through ``ToolRuntime``,
``HumanInTheLoopMiddleware`` pausing before a refund, the model built at import from the
project's ``.env`` (the key and the endpoint only there). Driven by the official SDK against a
scripted OpenAI-compatible model, asserting what LangGraph's own server gives.

The project is a template: each test copies it to a temporary directory and writes its ``.env``
there, with the scripted model's address (known only when the test runs) and a ledger file the
tools append a line to for each call that ran.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.schema import Command

from tests.api.conftest import FAST
from tests.utils.fake_openai import FakeOpenAIServer, ReplyLike, ToolCall
from tests.utils.server import LEAKY_ENV, ServerProcess, serving

PROJECT = Path(__file__).resolve().parent.parent / "projects" / "support_agent"
GRAPH = "support"
USER_TEXT = "refund order A1"
CONTEXT = {"user_id": "ada", "tier": "gold"}
FINAL_TEXT = "Done: order A1 is refunded 20.00."
LOOKUP_RESULT = "Order A1 for user ada (gold tier): kettle, total 20.00."
REFUND_RESULT = "Refunded 20.00 on order A1."
ASK: Any = {"messages": [{"role": "user", "content": USER_TEXT}]}
APPROVE: Command = {"resume": {"decisions": [{"type": "approve"}]}}


def script(request: dict[str, Any]) -> ReplyLike:
    """The model's turn, from the conversation so far (so a repeated call is answered the same
    way, and every call is counted in ``FakeOpenAIServer.requests``): look the order up, then
    refund it, then say so."""
    tool_results = [m for m in request["messages"] if m.get("role") == "tool"]
    if not tool_results:
        return ToolCall("lookup_order", {"order_id": "A1"})
    if len(tool_results) == 1:
        return ToolCall("refund", {"order_id": "A1", "amount": 20})
    return FINAL_TEXT


def copy_project(root: Path, model: FakeOpenAIServer, ledger: Path, lookup_delay: float) -> Path:
    """The project copied under ``root`` with its ``.env``; returns its ``langgraph.json``."""
    project = root / "support_agent"
    if not project.exists():
        shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    write_env(project, model, ledger, lookup_delay)
    return project / "langgraph.json"


def write_env(project: Path, model: FakeOpenAIServer, ledger: Path, lookup_delay: float) -> None:
    (project / ".env").write_text(
        f"OPENAI_API_KEY={model.api_key}\n"
        f"OPENAI_BASE_URL={model.base_url}\n"
        f"SUPPORT_AGENT_LEDGER={ledger}\n"
        f"SUPPORT_AGENT_LOOKUP_DELAY={lookup_delay}\n"
    )


def project_server(
    database_url: str, root: Path, config: Path, name: str = "support"
) -> ServerProcess:
    proc = ServerProcess(
        database_url,
        root / "data",
        config=config,
        name=name,
        lease_seconds=FAST["lease_seconds"],
        heartbeat_seconds=FAST["heartbeat_seconds"],
        poll_seconds=FAST["poll_seconds"],
    )
    # The key and the model's address come from the project's .env, never from the caller.
    assert not {"OPENAI_API_KEY", "OPENAI_BASE_URL"} & set(proc.env)
    assert {"OPENAI_API_KEY", "OPENAI_BASE_URL"} <= set(LEAKY_ENV)
    return proc


def ledger_lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def messages_of(values: dict[str, Any]) -> list[dict[str, Any]]:
    return list(values.get("messages") or [])


def the_interrupt(interrupts: Any) -> dict[str, Any]:
    """The one HITL request of a list of interrupts (``[{"value": ..., "id": ...}]``)."""
    [one] = interrupts
    value: dict[str, Any] = one["value"]
    return value


def check_hitl_request(request: dict[str, Any]) -> None:
    [action] = request["action_requests"]
    assert action["name"] == "refund"
    assert action["args"] == {"order_id": "A1", "amount": 20}
    [review] = request["review_configs"]
    assert review["action_name"] == "refund"
    assert set(review["allowed_decisions"]) == {"approve", "edit", "reject", "respond"}


# -- one approval, recorded once for the tests below ------------------------------------------


@dataclass
class Approval:
    """What the SDK saw of one run paused at the refund and one run that approved it."""

    output_keys: set[str] = field(default_factory=set)
    first: list[tuple[str, Any]] = field(default_factory=list)
    second: list[tuple[str, Any]] = field(default_factory=list)
    paused_thread: dict[str, Any] = field(default_factory=dict)
    paused_state: dict[str, Any] = field(default_factory=dict)
    first_run: dict[str, Any] = field(default_factory=dict)
    final_thread: dict[str, Any] = field(default_factory=dict)
    final_state: dict[str, Any] = field(default_factory=dict)
    second_run: dict[str, Any] = field(default_factory=dict)
    ledger: list[str] = field(default_factory=list)
    model_calls: int = 0
    waited: list[dict[str, Any]] = field(default_factory=list)
    """What ``runs.wait`` returned on another thread: at the pause, then after the approval."""
    log: str = ""


async def approve_a_refund(url: str, model: FakeOpenAIServer, ledger: Path) -> Approval:
    from langgraph_sdk import get_client

    seen = Approval()
    async with get_client(url=url) as client:
        # The graph's default assistant, by its id (LangGraph takes no graph name here).
        [assistant] = await client.assistants.search(graph_id=GRAPH)
        schemas = await client.assistants.get_schemas(assistant["assistant_id"])
        output_schema = schemas["output_schema"]
        assert output_schema is not None
        seen.output_keys = set(output_schema["properties"])
        thread_id = (await client.threads.create())["thread_id"]
        async for part in client.runs.stream(
            thread_id,
            GRAPH,
            input=ASK,
            context=CONTEXT,
            stream_mode=["updates", "values"],
        ):
            seen.first.append((part.event, part.data))
        seen.paused_thread = dict(await client.threads.get(thread_id))
        seen.paused_state = dict(await client.threads.get_state(thread_id))
        [first_run] = await client.runs.list(thread_id)
        seen.first_run = dict(first_run)
        async for part in client.runs.stream(
            thread_id,
            GRAPH,
            command=APPROVE,
            context=CONTEXT,
            stream_mode=["updates", "values"],
        ):
            seen.second.append((part.event, part.data))
        seen.final_thread = dict(await client.threads.get(thread_id))
        seen.final_state = dict(await client.threads.get_state(thread_id))
        runs = await client.runs.list(thread_id)
        seen.second_run = dict(next(r for r in runs if r["run_id"] != seen.first_run["run_id"]))
        seen.model_calls, seen.ledger = len(model.requests), ledger_lines(ledger)

        # The same with runs.wait, for another user on another thread.
        thread_id = (await client.threads.create())["thread_id"]
        for body in (
            {"input": ASK},
            {"command": APPROVE},
        ):
            waited: Any = await client.runs.wait(
                thread_id, GRAPH, context={"user_id": "bob"}, **body
            )
            seen.waited.append(waited)
    return seen


@pytest.fixture(scope="module")
def approval(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Approval:
    root = tmp_path_factory.mktemp("support")
    ledger = root / "ledger.txt"
    with FakeOpenAIServer(responder=script) as model:
        config = copy_project(root, model, ledger, lookup_delay=0)
        with serving(project_server(module_database_url, root, config)) as proc:
            seen = asyncio.run(approve_a_refund(proc.url, model, ledger))
            seen.log = proc.log_path.read_text(errors="replace")
    return seen


def values_chunks(parts: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [data for event, data in parts if event == "values"]


def test_the_run_context_reaches_the_tools_and_the_refund_waits(approval: Approval) -> None:
    assert "Traceback" not in approval.log, approval.log
    events = [event for event, _ in approval.first]
    assert events[0] == "metadata"
    assert {"updates", "values"} <= set(events)
    assert "error" not in events, approval.first

    # The lookup tool read the run's context (ToolRuntime.context: the dataclass, from JSON).
    paused_messages = messages_of(approval.paused_state["values"])
    [tool_message] = [m for m in paused_messages if m["type"] == "tool"]
    assert tool_message["name"] == "lookup_order"
    assert tool_message["content"] == LOOKUP_RESULT

    # The pause: an update with the HITL request, as LangGraph streams it.
    interrupts = [
        data["__interrupt__"]
        for event, data in approval.first
        if event == "updates" and "__interrupt__" in data
    ]
    assert len(interrupts) == 1, approval.first
    check_hitl_request(the_interrupt(interrupts[0]))
    # The last values chunk carries it too (LangGraph's values mode at an interrupt).
    last_values = values_chunks(approval.first)[-1]
    check_hitl_request(the_interrupt(last_values["__interrupt__"]))

    # The thread waits for the answer; the run did all it could (LangGraph: success).
    assert approval.paused_thread["status"] == "interrupted"
    [paused] = approval.paused_thread["interrupts"].values()
    check_hitl_request(the_interrupt(paused))
    check_hitl_request(the_interrupt(approval.paused_state["interrupts"]))
    assert approval.paused_state["next"] == ["HumanInTheLoopMiddleware.after_model"]
    assert approval.first_run["status"] == "success"
    assert approval.ledger[:2] == ["lookup-start A1 ada", "lookup-done A1 ada"]


def test_an_approved_refund_runs_once_and_the_agent_answers(approval: Approval) -> None:
    events = [event for event, _ in approval.second]
    assert "error" not in events, approval.second
    final = approval.final_state["values"]
    messages = messages_of(final)
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert messages[0]["content"] == USER_TEXT
    assert messages[4]["name"] == "refund"
    assert messages[4]["content"] == REFUND_RESULT
    assert messages[-1]["content"] == FINAL_TEXT
    assert not messages[-1].get("tool_calls")
    assert messages_of(values_chunks(approval.second)[-1])[-1]["content"] == FINAL_TEXT
    assert approval.final_thread["status"] == "idle"
    assert not approval.final_state["next"]
    assert not approval.final_state["interrupts"]
    assert approval.second_run["status"] == "success"
    # Each tool ran once, and the model was asked three times: lookup, refund, the answer.
    assert approval.ledger == [
        "lookup-start A1 ada",
        "lookup-done A1 ada",
        "refund A1 20.00 ada",
    ]
    assert approval.model_calls == 3


def test_the_output_schema_is_langchains_public_state(approval: Approval) -> None:
    """LangChain marks its middleware's bookkeeping channels private (``PrivateStateAttr``):
    the graph's output schema is ``messages`` (and ``structured_response``)."""
    assert "messages" in approval.output_keys
    assert not {"hitl_edited_tool_calls", "jump_to"} & approval.output_keys


def test_streamed_values_hold_only_the_output_schema(approval: Approval) -> None:
    """As LangGraph Server streams them (``graph.astream(..., output_keys=
    graph.output_channels)``): every ``values`` chunk's keys are in the output schema (plus
    ``__interrupt__`` at a pause), before and after the approval; so is every node's update.
    (The thread's state is the whole state on both servers: ``hitl_edited_tool_calls`` too.)"""
    allowed = approval.output_keys | {"__interrupt__"}
    for chunk in values_chunks(approval.first) + values_chunks(approval.second):
        assert set(chunk) <= allowed, json.dumps(sorted(chunk))
    for event, data in approval.first + approval.second:
        if event == "updates":
            for node, update in data.items():
                if isinstance(update, dict):
                    assert set(update) <= approval.output_keys, (node, sorted(update))


def test_wait_returns_only_the_output_schema(approval: Approval) -> None:
    paused, done = approval.waited
    check_hitl_request(the_interrupt(paused["__interrupt__"]))
    assert messages_of(done)[-1]["content"] == FINAL_TEXT
    allowed = approval.output_keys | {"__interrupt__"}
    for values in approval.waited:
        assert set(values) <= allowed, json.dumps(sorted(values))


# -- killed in the middle of the lookup, and again while it waits for the approval -------------


async def wait_for_line(ledger: Path, line: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in ledger_lines(ledger):
        assert time.monotonic() < deadline, f"no {line!r} in the ledger: {ledger_lines(ledger)}"
        await asyncio.sleep(0.05)


async def test_killed_in_the_middle_of_a_tool_nothing_completed_runs_twice(
    database_url: str, tmp_path: Path
) -> None:
    from langgraph_sdk import get_client

    ledger = tmp_path / "ledger.txt"
    async with FakeOpenAIServer(responder=script) as model:
        # A slow lookup: the server is killed while it runs.
        config = copy_project(tmp_path, model, ledger, lookup_delay=60)
        proc = project_server(database_url, tmp_path, config)
        try:
            await asyncio.to_thread(proc.start)
            async with get_client(url=proc.url) as client:
                thread_id = (await client.threads.create())["thread_id"]
                run = await client.runs.create(
                    thread_id,
                    GRAPH,
                    input=ASK,
                    context=CONTEXT,
                    stream_mode=["updates", "values"],
                )
                await wait_for_line(ledger, "lookup-start A1 ada")
            proc.kill()
            # The backend is fast again; the restarted server reads the .env again.
            write_env(tmp_path / "support_agent", model, ledger, lookup_delay=0)
            await asyncio.to_thread(proc.start)
            async with get_client(url=proc.url) as client:
                paused: Any = await client.runs.join(thread_id, run["run_id"])
                check_hitl_request(the_interrupt(paused["__interrupt__"]))
                thread = await client.threads.get(thread_id)
                assert thread["status"] == "interrupted"
                assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"
            # The model's first answer was checkpointed: only the lookup ran again.
            assert len(model.requests) == 2
            assert ledger_lines(ledger) == [
                "lookup-start A1 ada",
                "lookup-start A1 ada",
                "lookup-done A1 ada",
            ]

            # Killed again while it waits: the approval resumes it on the restarted server.
            await asyncio.to_thread(proc.restart)
            async with get_client(url=proc.url) as client:
                final: Any = await client.runs.wait(
                    thread_id,
                    GRAPH,
                    command=APPROVE,
                    context=CONTEXT,
                )
                state = await client.threads.get_state(thread_id)
                thread = await client.threads.get(thread_id)
        finally:
            proc.stop()
    assert messages_of(final)[-1]["content"] == FINAL_TEXT
    values: Any = state["values"]
    assert [m["type"] for m in messages_of(values)] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert messages_of(values)[2]["content"] == LOOKUP_RESULT
    assert thread["status"] == "idle"
    assert len(model.requests) == 3
    assert ledger_lines(ledger) == [
        "lookup-start A1 ada",
        "lookup-start A1 ada",
        "lookup-done A1 ada",
        "refund A1 20.00 ada",
    ]
    assert "Traceback" not in proc.log_path.read_text(errors="replace")
