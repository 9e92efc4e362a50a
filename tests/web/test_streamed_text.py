"""The page shows the agent's text as the model writes it, and the agent's compaction notes.

One server for the module, whose agent talks to a scripted OpenAI-compatible server that
streams each reply word by word, slowly (``chunk_delay``); it also serves a graph of its own
(``langgraph.json``) that reports a context compaction, as the agent does when a thread nears
its model's budget.
"""

from __future__ import annotations

import itertools
import json
import textwrap
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.utils.db import fresh_database
from tests.utils.fake_openai import FakeOpenAIServer, Reply, ToolCall
from tests.utils.server import ServerProcess
from tests.web.pages import CHROMIUM, make_server, open_page, running

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

if not CHROMIUM.exists():  # pragma: no cover - depends on the machine
    pytest.skip("Debian Chromium (/usr/bin/chromium) is not installed", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

PLAN = "Let me list the workspace first."
ANSWER = (
    "The workspace is empty, so there is nothing to change yet. Every file the task names is "
    "absent, no test fails, and the instruction is done as it stands; ask again once the files "
    "are there."
)
DELAY = 0.1
"""Seconds between two streamed chunks (a word each): the answer takes about four seconds."""

COMPACTED = {
    "type": "context_compacted",
    "removed_messages": 14,
    "tokens_before": 5200,
    "tokens_after": 1100,
    "budget": 6000,
    "summary": "The user asked for a log report.\nThe agent read app.log and found 3 errors.",
}

COMPACTING_GRAPH = textwrap.dedent(
    f'''
    """Reports a context compaction the way the agent does, then answers."""
    from langchain_core.messages import AIMessage
    from langgraph.config import get_stream_writer
    from langgraph.graph import END, START, MessagesState, StateGraph


    def compact(state: MessagesState) -> dict:
        get_stream_writer()({COMPACTED!r})
        return {{"messages": [AIMessage("Carried on with the summary.")]}}


    builder = StateGraph(MessagesState)
    builder.add_node("compact", compact)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", END)
    '''
)


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(chunk_delay=DELAY) as fake:
        yield fake


@pytest.fixture(scope="module")
def streaming_server(
    pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory, fake_openai: FakeOpenAIServer
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("web-stream")
    (tmp / "compacting.py").write_text(COMPACTING_GRAPH)
    config = tmp / "langgraph.json"
    config.write_text(json.dumps({"graphs": {"compacting": "./compacting.py:builder"}}))
    env = {"OPENAI_API_KEY": fake_openai.api_key, "OPENAI_BASE_URL": fake_openai.base_url}
    with (
        fresh_database(pg_admin_url) as url,
        running(make_server(url, tmp, "stream", env=env, config=config)) as srv,
    ):
        yield srv


@pytest.fixture
def page(browser: Browser, streaming_server: ServerProcess) -> Iterator[Page]:
    with open_page(browser, streaming_server, model="openai:") as pg:
        yield pg


SAMPLE = """
step => {
  const li = document.querySelector(`.ev-step[data-step="${step}"]`);
  const say = li && li.querySelector(".say[data-message-id]");
  return {
    text: say ? say.textContent : null,
    streaming: say ? say.dataset.streaming : null,
    finished: Boolean(li && li.querySelector(".meta").textContent),
  };
}
"""
"""Step ``step``'s bubble now: its text, whether it is still streaming, whether the step ended
(``step_finished`` writes the step's meta line)."""


def sample_step(page: Page, step: int, timeout: float = 60.0) -> list[str]:
    """The bubble's text, sampled every 50 ms while the step streams, until the step ends."""
    samples: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        now: dict[str, Any] = page.evaluate(SAMPLE, step)
        if now["finished"]:
            return samples
        if now["text"] is not None and now["streaming"] == "true":
            samples.append(now["text"])
        assert time.monotonic() < deadline, f"step {step} did not end: {samples[-3:]}"
        page.wait_for_timeout(50)


def start_free_text(page: Page, text: str) -> str:
    page.get_by_label("Task", exact=True).select_option("__free_text__")
    page.get_by_label("Instruction").fill(text)
    page.get_by_role("button", name="Start").click()
    page.wait_for_function("location.hash.startsWith('#/thread/')")
    return str(page.evaluate("location.hash.split('/').pop()"))


def test_the_text_grows_as_the_model_writes_it_and_the_final_message_replaces_it(
    page: Page, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.add_replies(
        Reply(content=PLAN, tool_calls=(ToolCall("list_files", {"path": "."}),)),
        Reply(content=ANSWER),
    )
    start_free_text(page, "Is there anything left to change?")
    samples = sample_step(page, 2)

    # Growing: each sample is the one before it or more of the same text, never less or other.
    distinct = [s for i, s in enumerate(samples) if i == 0 or s != samples[i - 1]]
    for before, after in itertools.pairwise(distinct):
        assert after.startswith(before) and len(after) > len(before), (before, after)
    assert all(ANSWER.startswith(s) for s in distinct), distinct
    # Partial texts, at least three, were on the page before the step ended.
    assert len([s for s in distinct if len(s) < len(ANSWER)]) >= 3, samples

    end = page.locator(".ev-end")
    expect(end).to_have_attribute("data-status", "success", timeout=30_000)
    step2 = page.locator('.ev-step[data-step="2"] .say')
    expect(step2).to_have_count(1)
    expect(step2).to_have_text(ANSWER)
    expect(step2).to_have_attribute("data-streaming", "false")
    # The tool call's argument chunks stayed out of the text: step 1 says the plan only.
    step1 = page.locator('.ev-step[data-step="1"] .say')
    expect(step1).to_have_text(PLAN)
    expect(page.locator('.ev-tool[data-state="ok"] .tool-name')).to_have_text("list_files")
    # The final message replaced the streamed one: the answer is on the page once.
    assert page.locator("#timeline").inner_text().count(ANSWER) == 1
    # A replay of the stored run (a reload) shows it the same way, once.
    page.reload()
    expect(page.locator(".ev-end")).to_have_attribute("data-status", "success")
    expect(page.locator('.ev-step[data-step="2"] .say')).to_have_text(ANSWER)
    assert page.locator("#timeline").inner_text().count(ANSWER) == 1
    assert page.locator("#timeline").inner_text().count(PLAN) == 1


def test_a_context_compaction_is_a_note_with_its_summary_folded(
    page: Page, streaming_server: ServerProcess
) -> None:
    with httpx.Client(base_url=streaming_server.url, timeout=30) as http:
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        body = {
            "assistant_id": "compacting",
            "input": {"messages": [{"role": "user", "content": "go on"}]},
            "stream_mode": ["updates", "custom", "messages-tuple"],
        }
        run = http.post(f"/threads/{thread_id}/runs", json=body)
        assert run.status_code == 200, run.text
    page.evaluate("id => { location.hash = `#/thread/${id}`; }", thread_id)
    note = page.locator(".ev-compacted")
    expect(note).to_have_count(1, timeout=20_000)
    expect(note.locator(".compacted")).to_have_text(
        "Context compacted: 14 messages summarized, 5,200 → 1,100 tokens (budget 6,000)"
    )
    summary = note.locator("details pre")
    expect(summary).to_be_hidden()
    note.get_by_text("Summary of the earlier turns").click()
    expect(summary).to_be_visible()
    expect(summary).to_have_text(str(COMPACTED["summary"]))
    expect(page.locator(".ev-end")).to_have_attribute("data-status", "success")
    expect(page.locator(".ev-step .say")).to_have_text("Carried on with the summary.")
