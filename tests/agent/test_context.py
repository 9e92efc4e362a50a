"""Context compaction (``agent.context``): every model call stays under the context budget.

The graph tests run the real graph on a real PostgreSQL checkpointer: a long ``counter`` task
with a 600-token budget, on the offline model (a trimmed digest is the summary) and on a model
that writes its summary (and crashes while writing the first). Every prompt a model received is
counted with the agent's own counter. The unit tests pin the splitting rule on hostile shapes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.pregel import Pregel
from pydantic import PrivateAttr, ValidationError

from agent import Limits, build_graph
from agent.context import (
    SUMMARY_PROMPT,
    ContextBudgetError,
    ContextCompactor,
    count_tokens,
    default_budget,
    task_index,
    turns,
)
from agent.context_summary import SUMMARY_NAME, conversation_length, digest, summary_counts
from agent.models import OfflineChatModel
from agent.models.openai_model import openai_chat_model
from agent.settings import AgentSettings
from agent.tasks.base import MARKER
from agent.tools import Sandbox, ToolSpec, command_tool, default_tools, workspace_dir
from api.engine.runtime import Runtime
from api.platform.settings import Settings
from tests.agent.test_graph import make_config, stream
from tests.utils.fake_openai import FakeOpenAIServer, ReplyLike, ToolCall
from tests.utils.scripted_model import ScriptedChatModel, call, calls
from tests.utils.tasks import counter

BUDGET = 600
EVENT_FIELDS = {"type", "removed_messages", "tokens_before", "tokens_after", "budget", "summary"}


class RecordingOffline(OfflineChatModel):
    """The offline model, keeping every prompt it answered."""

    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        self._prompts.append(list(messages))
        return super().reply(messages)


class SummarizingModel(BaseChatModel):
    """A model that writes its own summaries: the offline plans for agent steps, a text for a
    summarizing request. The first ``fail_first`` summarizing requests raise (a crash)."""

    fail_first: int = 0
    _plans: OfflineChatModel = PrivateAttr(default_factory=OfflineChatModel)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _summaries: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _failed: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "summarizing-test-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kw: Any) -> ChatResult:
        if messages and messages[0].text.startswith(SUMMARY_PROMPT[:40]):
            self._summaries.append(list(messages))
            if self._failed < self.fail_first:
                self._failed += 1
                raise RuntimeError("killed while summarizing")
            n = len(self._summaries)
            reply = AIMessage(f"Summary {n}: lines were appended with append.py, all succeeded.")
            reply.usage_metadata = {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70}
        else:
            self._prompts.append(list(messages))
            reply = self._plans.reply(messages)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def command_only() -> list[ToolSpec]:
    """Only ``run_command`` (the counter task's tool), unconfined: the tool schemas then leave
    room in a 600-token budget, and the test needs no bubblewrap."""
    return [command_tool(sandbox=Sandbox("off"))]


def counter_graph(runtime: Runtime, model: BaseChatModel, budget: int = BUDGET) -> Pregel:
    return build_graph(
        model=model,
        tools=command_only(),
        checkpointer=runtime.saver,
        data_dir=runtime.settings.data_dir,
        limits=Limits(context_budget=budget, max_steps=40),
        sandbox=Sandbox("off"),
    )


def schemas() -> list[dict[str, Any]]:
    return [t.openai_schema() for t in command_only()]


def assert_calls_with_results(prompt: Sequence[BaseMessage]) -> None:
    """Every call in ``prompt`` has its result in it, and every result its call."""
    asked = {c["id"] for m in prompt if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in prompt if isinstance(m, ToolMessage)}
    assert asked == answered, (asked ^ answered, prompt)


def assert_counter_lines(settings: Settings, config: Any, n: int) -> None:
    ws = workspace_dir(settings.data_dir, config["configurable"]["thread_id"])
    lines = (ws / "counter.txt").read_text().split()
    assert sorted(lines, key=int) == [str(i) for i in range(1, n + 1)]  # each exactly once
    attempts = (ws / ".counter-attempts").read_text().splitlines()
    assert len(attempts) == n and all(" applied " in a for a in attempts)


# --------------------------------------------------------------------------------------------
# the real graph


async def test_long_task_on_the_offline_model_stays_under_budget_and_verifies(
    runtime: Runtime, settings: Settings
) -> None:
    model = RecordingOffline()
    graph = counter_graph(runtime, model)
    limits = Limits(context_budget=BUDGET, max_steps=40)
    config = make_config(limits)
    out = await stream(graph, counter(16), config)

    state = await graph.aget_state(config)
    assert state.values["status"] == "verified", state.values.get("verdict")
    assert_counter_lines(settings, config, 16)

    # 12 steps (1 | 2 3 | 4 | ...) plus the final answer: every prompt fits, no call without
    # its result, and the last prompts are much shorter than the conversation they stand for.
    prompts = model._prompts
    assert len(prompts) == 12
    sizes = [count_tokens(p, schemas()) for p in prompts]
    assert max(sizes) <= BUDGET, sizes
    for prompt in prompts:
        assert isinstance(prompt[0], SystemMessage)
        assert_calls_with_results(prompt)
        assert MARKER.search(prompt[task_index(prompt) or 0].text)  # the task is always there
    assert conversation_length(prompts[-1]) > 2 * len(prompts[-1])

    compacted = out.of_type("context_compacted")
    assert len(compacted) >= 2
    for event in compacted:
        assert set(event) == EVENT_FIELDS
        assert event["budget"] == BUDGET
        assert event["tokens_before"] > 0.8 * BUDGET
        assert event["tokens_after"] <= BUDGET
        assert event["tokens_after"] < event["tokens_before"]
        assert event["removed_messages"] >= 1
        assert "earlier messages" in event["summary"]
        assert "run_command [success]" in event["summary"]  # the offline digest

    # The summary is part of the checkpointed state, and of the thread's history.
    messages = state.values["messages"]
    summaries = [m for m in messages if summary_counts(m) is not None]
    assert len(summaries) == 1 and summaries[0].name == SUMMARY_NAME
    assert summaries[0].text == compacted[-1]["summary"]
    assert task_index(messages) == 0 and summary_counts(messages[1]) is not None
    history = [s async for s in graph.aget_state_history(config)]
    texts = {m.text for s in history for m in s.values.get("messages", [])}
    assert {e["summary"] for e in compacted} <= texts
    # Nothing is lost from the count: the task, 12 replies, 16 results (the summary stands
    # for the removed ones), so the offline model's call ids never repeated.
    assert conversation_length(messages) == 1 + 12 + 16


async def test_a_crash_while_summarizing_loses_nothing_and_compacts_once(
    runtime: Runtime, settings: Settings
) -> None:
    model = SummarizingModel(fail_first=1)
    graph = counter_graph(runtime, model)
    config = make_config(Limits(context_budget=BUDGET, max_steps=40))
    with pytest.raises(RuntimeError, match="killed while summarizing"):
        await stream(graph, counter(8), config)

    crashed = await graph.aget_state(config)
    assert crashed.next == ("agent",)
    assert not any(summary_counts(m) for m in crashed.values["messages"])
    before = list(crashed.values["messages"])

    out = await stream(graph, None, config)
    state = await graph.aget_state(config)
    assert state.values["status"] == "verified"
    assert_counter_lines(settings, config, 8)

    compacted = out.of_type("context_compacted")
    # The crashed attempt emitted nothing and wrote nothing; the resumed step compacted once.
    assert len(model._summaries) == len(compacted) + 1
    assert compacted[0]["summary"].endswith(
        "Summary 2: lines were appended with append.py, all succeeded."
    )
    history = [s async for s in graph.aget_state_history(config)]
    first_with_summary = [
        s for s in history if any(summary_counts(m) for m in s.values.get("messages", []))
    ][-1]
    kept_ids = {m.id for m in first_with_summary.values["messages"]}
    summary = next(m for m in first_with_summary.values["messages"] if summary_counts(m))
    counts = summary_counts(summary)
    assert counts is not None
    # Every message before the crash is either still there or counted in the summary.
    assert len([m for m in before if m.id in kept_ids]) - 1 + counts["messages"] == len(before)
    # The summarizing requests fit the budget too, and the agent's prompts did.
    for prompt in model._summaries:
        assert count_tokens(prompt) <= BUDGET
    for prompt in model._prompts:
        assert count_tokens(prompt, schemas()) <= BUDGET
        assert_calls_with_results(prompt)
    assert state.values["usage"]["tokens"] >= 70 * len(compacted)  # the summaries' cost counts


async def test_a_task_that_cannot_fit_fails_before_calling_the_model(
    runtime: Runtime, tmp_path: Path
) -> None:
    model = ScriptedChatModel(replies=[AIMessage("never")])
    graph = counter_graph(runtime, model)
    config = make_config(Limits(context_budget=BUDGET))
    with pytest.raises(ContextBudgetError, match="context budget is 600 tokens"):
        await stream(graph, {"messages": [HumanMessage("word " * 2000)]}, config)
    assert model.calls_made == 0


# --------------------------------------------------------------------------------------------
# the splitting rule


def tool(call_id: str, text: str = "ok") -> ToolMessage:
    return ToolMessage(text, tool_call_id=call_id, name="run_command")


def ai(*ids: str, text: str = "") -> AIMessage:
    return calls(*[{**call("run_command", command=["true"]), "id": i} for i in ids], content=text)


def spans(messages: Sequence[BaseMessage]) -> list[list[int]]:
    return [list(s) for s in turns(messages)]


def call_ids(message: BaseMessage) -> set[str | None]:
    return {c["id"] for c in message.tool_calls} if isinstance(message, AIMessage) else set()


def test_turns_keep_calls_with_their_results() -> None:
    shape = [HumanMessage("task"), ai("a", "b"), tool("a"), tool("b"), AIMessage("done")]
    assert spans(shape) == [[0], [1, 2, 3], [4]]
    feedback = [*shape, HumanMessage("check failed", name="verify"), ai("c"), tool("c")]
    assert spans(feedback) == [[0], [1, 2, 3], [4], [5], [6, 7]]
    assert spans([]) == []


def test_turns_on_hostile_shapes() -> None:
    # An orphan result first stands alone; one after a human stays with that human.
    assert spans([tool("x"), HumanMessage("task"), AIMessage("hi")]) == [[0], [1], [2]]
    assert spans([HumanMessage("task"), tool("x"), AIMessage("hi")]) == [[0, 1], [2]]
    # A result answered late (after another message) pulls everything between into the turn.
    late = [HumanMessage("t"), ai("a", "b"), tool("a"), HumanMessage("more"), tool("b"), ai("c")]
    assert spans(late) == [[0], [1, 2, 3, 4], [5]]
    # A call never answered, and two calls with one id (the first one owns it).
    assert spans([ai("a"), HumanMessage("next"), AIMessage("x")]) == [[0], [1], [2]]
    dup = [ai("a"), tool("a"), ai("a"), tool("a")]
    assert spans(dup) == [[0, 1, 2, 3]]


def test_turns_never_cut_between_a_call_and_its_result_random_shapes() -> None:
    rng = random.Random(19)
    for _ in range(300):
        shape: list[BaseMessage] = []
        for _ in range(rng.randint(0, 14)):
            kind = rng.choice(["human", "ai", "calls", "tool", "orphan"])
            if kind == "human":
                shape.append(HumanMessage("h"))
            elif kind == "ai":
                shape.append(AIMessage("a"))
            elif kind == "calls":
                shape.append(ai(*[f"c{rng.randint(0, 9)}" for _ in range(rng.randint(1, 3))]))
            else:
                shape.append(tool(f"c{rng.randint(0, 9)}" if kind == "tool" else "orphan"))
        cut = spans(shape)
        assert [i for s in cut for i in s] == list(range(len(shape)))
        unit = {i: n for n, s in enumerate(cut) for i in s}
        for j, m in enumerate(shape):
            if isinstance(m, ToolMessage) and j > 0:
                assert unit[j] == unit[j - 1]
                owners = [i for i, a in enumerate(shape[:j]) if m.tool_call_id in call_ids(a)]
                if owners:
                    assert unit[owners[0]] == unit[j]


async def test_compaction_with_a_call_at_the_boundary_removes_whole_turns() -> None:
    system = SystemMessage("You are an agent.")
    compactor = ContextCompactor(OfflineChatModel(), system, [], budget=400)
    long = "x" * 400
    shape: list[BaseMessage] = [HumanMessage("the task", id="t")]
    for n in range(6):
        shape += [ai(f"c{n}", text=f"step {n}"), tool(f"c{n}", long)]
    for n, m in enumerate(shape):
        m.id = m.id or f"m{n}"
    done = await compactor.fit(shape, {})
    assert done is not None
    kept = done.messages
    assert kept[0].id == "t" and summary_counts(kept[1]) is not None
    assert kept[-2:] == shape[-2:]  # the latest turn, call and result together
    assert_calls_with_results(kept)
    assert count_tokens([system, *kept]) <= 400
    removed = {w.id for w in done.writes} | {kept[1].id}
    assert all((f"m{i}" in removed) == (f"m{i + 1}" in removed) for i in range(1, 12, 2))
    assert done.event["removed_messages"] == len(shape) - len(kept) + 1
    # A compaction is idempotent in what it stands for: nothing is lost from the count.
    assert conversation_length(kept) == len(shape)


async def test_compaction_below_the_threshold_does_nothing_and_too_big_fails() -> None:
    system = SystemMessage("You are an agent.")
    compactor = ContextCompactor(OfflineChatModel(), system, [], budget=400)
    assert await compactor.fit([HumanMessage("short", id="t")], {}) is None
    huge = [HumanMessage("the task " * 300, id="t"), ai("a"), tool("a")]
    with pytest.raises(ContextBudgetError, match="THREADLINE_CONTEXT_BUDGET"):
        await compactor.fit(huge, {})


def test_digest_neutralizes_task_markers_and_trims() -> None:
    old = HumanMessage('Do it.\n(threadline task: counter {"n": 3})')
    text = digest([old, ai("a", text="calling"), tool("a", "y" * 5000)], 300)
    assert len(text) <= 300 and "counter" in text
    assert digest([], 300) == ""
    from agent.context_summary import summary_message

    message = summary_message(text, {"messages": 3, "replies": 1, "feedback": 0}, message_id="m")
    assert not MARKER.search(message.text)


def test_default_budgets_and_the_setting(monkeypatch: pytest.MonkeyPatch, clean_env: None) -> None:
    assert default_budget("gpt-4o-mini") == 128_000 - 4096
    assert default_budget("openai/gpt-4o") == 128_000 - 4096
    assert default_budget("SmolLM2-135M-Instruct") == 8192 - 2048
    assert default_budget("some-local-model") == 32_000 - 4096
    assert default_budget(None) == 32_000 - 4096
    monkeypatch.setenv("THREADLINE_CONTEXT_BUDGET", "1536")
    assert AgentSettings().limits.context_budget == 1536
    monkeypatch.setenv("THREADLINE_CONTEXT_BUDGET", "10")
    with pytest.raises(ValidationError, match="context_budget"):
        AgentSettings()


async def test_a_real_chat_model_writes_the_summary_over_http(runtime: Runtime) -> None:
    """An OpenAI-compatible endpoint (the scripted test server): the summary is the model's
    answer to a summarizing request (no tools, bounded reply, not streamed as agent text)."""
    agent_requests: list[dict[str, Any]] = []

    def respond(request: dict[str, Any]) -> ReplyLike:
        if request["messages"][0]["content"].startswith(SUMMARY_PROMPT[:40]):
            return "The workspace was listed several times; it is empty."
        agent_requests.append(request)
        n = len(agent_requests)
        path = "." if n % 2 else "./"  # not the very same call again: that would be stuck
        return ToolCall("list_files", {"path": path}) if n < 10 else "Listed ten times."

    with FakeOpenAIServer(responder=respond) as server:
        model = openai_chat_model(api_key=server.api_key, base_url=server.base_url)
        graph = build_graph(
            model=model,
            tools=[t for t in default_tools() if t.name == "list_files"],
            checkpointer=runtime.saver,
            data_dir=runtime.settings.data_dir,
            limits=Limits(context_budget=BUDGET, max_steps=40),
        )
        config = make_config(Limits(context_budget=BUDGET, max_steps=40))
        ask = {"messages": [HumanMessage("List the files ten times.")]}
        out = await stream(graph, ask, config)
        summarizing = [r for r in server.requests if r not in agent_requests]

    state = await graph.aget_state(config)
    assert state.values["status"] == "agent_done"  # a free-text task: no check to run
    compacted = out.of_type("context_compacted")
    assert compacted and len(summarizing) == len(compacted)
    assert all("it is empty" in e["summary"] for e in compacted)
    for request in summarizing:
        assert "tools" not in request
        assert request.get("max_tokens") or request.get("max_completion_tokens")
    for request in agent_requests:  # every call asked about a result it carries
        asked = {c["id"] for m in request["messages"] for c in m.get("tool_calls") or []}
        answered = {m["tool_call_id"] for m in request["messages"] if m["role"] == "tool"}
        assert asked == answered
    assert conversation_length(state.values["messages"]) == 1 + 10 + 9  # task, replies, results
    assert len(agent_requests[-1]["messages"]) < 1 + 10 + 9
    summaries = [m for m in state.values["messages"] if summary_counts(m) is not None]
    assert len(summaries) == 1 and "it is empty" in summaries[0].text


async def test_the_summarizing_call_is_not_streamed_as_the_agents_text(runtime: Runtime) -> None:
    graph = counter_graph(runtime, SummarizingModel())
    config = make_config(Limits(context_budget=BUDGET, max_steps=40))
    streamed: list[str] = []
    compactions = 0
    async for mode, data in graph.astream(
        counter(6), config, stream_mode=["messages", "custom"], durability="sync"
    ):
        if mode == "messages":
            streamed.append(data[0].text)
        elif data.get("type") == "context_compacted":
            compactions += 1
    assert compactions >= 1
    assert any("Appending line" in t for t in streamed)  # the agent's own replies are streamed
    assert not any("Summary" in t for t in streamed)
