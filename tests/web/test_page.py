"""The web page in headless Chromium against a real server (subprocess) and real PostgreSQL.

Tests that only drive the page share one server (module scope, its own fresh database); the
kill-and-restart tests each get a server of their own on the ``database_url`` fixture, which they
SIGKILL and restart on the same port, database and data directory. Screenshots go to
``test-artifacts/web/``; with ``UPDATE_DOCS_SCREENSHOT=1`` the run that survived a kill is also
saved as ``docs/screenshot.png``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.utils.db import fresh_database
from tests.utils.server import ServerProcess
from tests.web.pages import CHROMIUM, RECORD_CONNECTION, make_server, open_page, running

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

if not CHROMIUM.exists():  # pragma: no cover - depends on the machine
    pytest.skip("Debian Chromium (/usr/bin/chromium) is not installed", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "web"
DOCS_SCREENSHOT = REPO / "docs" / "screenshot.png"

# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_server(
    pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One server (own fresh database) for the tests that never kill it: saves start-ups."""
    tmp = tmp_path_factory.mktemp("web-shared")
    with fresh_database(pg_admin_url) as url, running(make_server(url, tmp, "shared")) as srv:
        yield srv


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of the test's own (``database_url``), which the test may kill and restart."""
    with running(make_server(database_url, tmp_path, "crash")) as srv:
        yield srv


@pytest.fixture
def page(browser: Browser, shared_server: ServerProcess) -> Iterator[Page]:
    with open_page(browser, shared_server) as pg:
        yield pg


@pytest.fixture
def crash_page(browser: Browser, server: ServerProcess) -> Iterator[Page]:
    with open_page(browser, server) as pg:
        yield pg


def shot(page: Page, name: str, *, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


# -- helpers -----------------------------------------------------------------------------------


def start_task(page: Page, task: str, **params: str) -> str:
    """Start a demo task from the form; returns the new thread's id (from the URL)."""
    before = page.evaluate("location.hash")
    page.get_by_label("Task", exact=True).select_option(task)
    for name, value in params.items():
        page.locator(f"#param-{name}").fill(value)
    page.get_by_role("button", name="Start").click()
    page.wait_for_function(
        "before => location.hash.startsWith('#/thread/') && location.hash !== before", arg=before
    )
    thread_id = page.evaluate("location.hash.split('/').pop()")
    expect(page.locator(f'#threads li[data-thread-id="{thread_id}"]')).to_be_visible()
    return str(thread_id)


def thread_badge(page: Page, thread_id: str) -> Locator:
    return page.locator(f'#threads li[data-thread-id="{thread_id}"] .badge')


def get(srv: ServerProcess, path: str) -> httpx.Response:
    return httpx.get(srv.url + path, timeout=10)


def workspace_file(srv: ServerProcess, thread_id: str, path: str) -> str:
    r = get(srv, f"/threads/{thread_id}/workspace/{path}")
    assert r.status_code == 200, r.text
    return r.text


def assert_no_duplicate_entries(page: Page) -> None:
    """Every step and tool call appears once per run, whatever was replayed."""
    for run in page.locator(".run").all():
        steps = run.locator(".ev-step").evaluate_all("els => els.map(e => e.dataset.step)")
        calls = run.locator(".ev-tool").evaluate_all("els => els.map(e => e.dataset.toolCallId)")
        assert len(steps) == len(set(steps)), steps
        assert len(calls) == len(set(calls)), calls


# -- tests -------------------------------------------------------------------------------------


def test_counter_shows_live_tool_calls_and_verdict(
    page: Page, shared_server: ServerProcess
) -> None:
    thread_id = start_task(page, "counter", n="4", delay="0.2")
    end = page.locator(".ev-end")
    expect(end).to_have_attribute("data-status", "success", timeout=20_000)
    expect(end).to_contain_text("task verified")

    tools = page.locator(".ev-tool")
    expect(tools).to_have_count(4)
    expect(page.locator(".ev-tool[data-state=ok]")).to_have_count(4)
    for i in range(4):
        text = tools.nth(i).inner_text()
        assert "run_command" in text and "append.py" in text, text  # name and arguments
        assert re.search(r"\d+ ms|\d+\.\d+ s", text), text  # duration
        assert "appended" in text, text  # result
    verify = page.locator(".ev-verify")
    expect(verify).to_have_attribute("data-status", "verified")
    expect(verify).to_contain_text("counter.txt holds 1..4, each once")
    expect(page.locator(".ev-human")).to_contain_text("Append the numbers 1 to 4")
    expect(page.locator("#c-step")).to_have_text("4")
    expect(page.locator("#c-budget")).to_contain_text("steps")
    expect(thread_badge(page, thread_id)).to_have_text("idle")
    expect(page.locator("#conn")).to_have_attribute("data-state", "idle")
    assert "live" in page.evaluate("window.__conn")
    assert_no_duplicate_entries(page)
    # Lines 2 and 3 are appended by parallel calls: either order, each once.
    lines = workspace_file(shared_server, thread_id, "counter.txt").split()
    assert sorted(lines, key=int) == ["1", "2", "3", "4"]

    # Reopening the thread replays the finished run from its stored events, identically.
    page.reload()
    expect(page.locator(".ev-end")).to_have_attribute("data-status", "success")
    expect(page.locator(".ev-tool[data-state=ok]")).to_have_count(4)
    shot(page, "counter-verified")


def test_approval_edit_validates_and_runs_the_edited_call(
    page: Page, shared_server: ServerProcess
) -> None:
    thread_id = start_task(page, "greet", name="Ada")
    card = page.locator(".approval")
    expect(card).to_have_count(1, timeout=15_000)
    expect(card).to_contain_text("write_file")
    expect(card).to_contain_text("Hello, Ada!")
    # Why it asks: the request's description (LangChain's human-in-the-loop action request).
    expect(card).to_contain_text("write_file is not read-only")
    expect(thread_badge(page, thread_id)).to_have_text("interrupted")

    card.get_by_role("button", name="Edit…").click()
    args = card.get_by_label("Arguments (JSON)")
    expect(args).to_be_focused()
    submit = card.get_by_role("button", name="Approve with these arguments")
    # Not JSON: refused in the page, nothing sent.
    args.fill('{"path": "greeting.txt", "content": ')
    submit.click()
    expect(card.locator(".edit-form .error")).to_contain_text("Not valid JSON")
    expect(args).to_have_attribute("aria-invalid", "true")
    # JSON, but not the tool's arguments: the server's 422 detail is shown.
    args.fill('{"path": "greeting.txt", "text": "hi"}')
    submit.click()
    expect(card.locator(".edit-form .error")).to_contain_text("content: Field required")
    shot(page, "approval-card-422")

    edited = "Hello, Ada Lovelace!\n"
    args.fill(json.dumps({"path": "greeting.txt", "content": edited}))
    submit.click()
    expect(card).to_have_count(0)
    runs = page.locator(".run")
    expect(runs).to_have_count(2)
    second = runs.nth(1)
    expect(second).to_contain_text("decision: edit")
    expect(runs.nth(0).locator(".ev-interrupt")).to_contain_text("approved with edited arguments")
    expect(second.locator(".ev-end")).to_be_visible(timeout=15_000)
    tool = second.locator(".ev-tool")
    expect(tool).to_have_attribute("data-state", "ok")
    expect(tool).to_contain_text("Lovelace")
    expect(tool).to_contain_text("Wrote")
    assert workspace_file(shared_server, thread_id, "greeting.txt") == edited
    # The check was for the original greeting: the verdict says so.
    expect(second.locator(".ev-verify").last).to_contain_text("expected 'Hello, Ada!'")
    expect(second.locator(".ev-end")).to_contain_text("task failed")
    shot(page, "approval-edited")


def test_reject_ends_with_a_verdict_and_decisions_elsewhere_show_up(
    page: Page, shared_server: ServerProcess
) -> None:
    start_task(page, "greet", name="Bob")
    card = page.locator(".approval")
    expect(card).to_have_count(1, timeout=15_000)
    shot(page, "approval-card")
    card.get_by_role("button", name="Reject…").click()
    card.get_by_label("Message for the agent").fill("not today")
    card.get_by_role("button", name="Reject the call").click()
    expect(card).to_have_count(0)
    second = page.locator(".run").nth(1)
    expect(second.locator(".ev-end")).to_have_attribute("data-status", "success", timeout=15_000)
    tool = second.locator(".ev-tool")
    expect(tool).to_have_attribute("data-state", "error")
    expect(tool).to_contain_text("not today")
    interrupt = page.locator(".run").nth(0).locator(".ev-interrupt")
    expect(interrupt).to_contain_text("rejected (“not today”)")
    expect(second.locator(".ev-verify").last).to_have_attribute("data-status", "failed")
    expect(second.locator(".ev-end")).to_contain_text("task failed")
    shot(page, "rejected")

    # A decision made through the API (another tab, a script) removes the card and the page
    # follows the run it started.
    thread_id = start_task(page, "greet", name="Cy")
    expect(card).to_have_count(1, timeout=15_000)
    interrupt_id = get(shared_server, f"/threads/{thread_id}/state").json()["interrupts"][0]["id"]
    r = httpx.post(
        f"{shared_server.url}/threads/{thread_id}/approvals",
        json={"interrupt_id": interrupt_id, "decisions": [{"type": "approve"}]},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    expect(card).to_have_count(0, timeout=10_000)
    runs = page.locator(".run")
    expect(runs).to_have_count(2, timeout=10_000)
    expect(runs.nth(1).locator(".ev-end")).to_contain_text("task verified", timeout=15_000)
    assert workspace_file(shared_server, thread_id, "greeting.txt") == "Hello, Cy!\n"


def test_parallel_calls_are_one_card_decided_call_by_call_and_sent_together(
    page: Page, shared_server: ServerProcess
) -> None:
    """``notes`` asks about its two writes in one request: one card with a block per call, each
    decided on its own; one answer carries both decisions, in order."""
    thread_id = start_task(page, "notes")
    card = page.locator(".approval")
    expect(card).to_have_count(1, timeout=15_000)
    expect(card.locator("h3")).to_have_text("Approve 2 calls?")
    calls = card.locator(".call")
    expect(calls).to_have_count(2)
    expect(calls.nth(0)).to_contain_text("a.txt")
    expect(calls.nth(1)).to_contain_text("b.txt")
    for i in range(2):
        expect(calls.nth(i)).to_contain_text("write_file is not read-only")
    send = card.get_by_role("button", name="Send 2 decisions")
    expect(send).to_be_disabled()  # nothing is sent before every call is decided

    calls.nth(0).get_by_role("button", name="Approve").click()
    expect(calls.nth(0)).to_have_attribute("data-choice", "approve")
    expect(card).to_contain_text("1 of 2 decided")
    expect(send).to_be_disabled()
    # An edit the server refuses: its error is shown at that call, which is undecided again.
    calls.nth(1).get_by_role("button", name="Edit…").click()
    calls.nth(1).get_by_label("Arguments (JSON)").fill('{"path": "b.txt"}')
    calls.nth(1).get_by_role("button", name="Approve with these arguments").click()
    expect(calls.nth(1)).to_have_attribute("data-choice", "edit")
    expect(send).to_be_enabled()
    send.click()
    refused = calls.nth(1).locator(".edit-form .error")
    expect(refused).to_contain_text("decision 2 (write_file)")
    expect(refused).to_contain_text("content: Field required")
    expect(calls.nth(1)).to_have_attribute("data-choice", "")
    expect(calls.nth(0)).to_have_attribute("data-choice", "approve")
    expect(send).to_be_disabled()
    assert get(shared_server, f"/threads/{thread_id}/audit").json() == []

    calls.nth(1).get_by_role("button", name="Reject…").click()
    calls.nth(1).get_by_label("Message for the agent").fill("not b")
    calls.nth(1).get_by_role("button", name="Reject the call").click()
    expect(calls.nth(1)).to_have_attribute("data-choice", "reject")
    expect(calls.nth(1)).to_contain_text("Will be rejected (“not b”)")
    shot(page, "approval-two-calls")
    send.click()
    expect(card).to_have_count(0)
    runs = page.locator(".run")
    expect(runs).to_have_count(2)
    second = runs.nth(1)
    expect(second).to_contain_text("decision: approve, reject")
    expect(runs.nth(0).locator(".ev-interrupt")).to_contain_text(
        "write_file approved, write_file rejected (“not b”)"
    )
    expect(second.locator(".ev-end")).to_be_visible(timeout=15_000)
    expect(second.locator(".ev-tool")).to_have_count(2)
    expect(second.locator(".ev-tool[data-state=ok]")).to_contain_text("a.txt")
    expect(second.locator(".ev-tool[data-state=error]")).to_contain_text("not b")
    assert workspace_file(shared_server, thread_id, "a.txt") == "alpha\n"
    assert get(shared_server, f"/threads/{thread_id}/workspace/b.txt").status_code == 404
    audit = get(shared_server, f"/threads/{thread_id}/audit").json()
    assert [r["detail"]["args"]["path"] for r in audit if r["kind"] == "tool"] == ["a.txt"]
    [decision] = [r for r in audit if r["kind"] == "decision"]
    assert decision["detail"]["answer"] == {
        "decisions": [{"type": "approve"}, {"type": "reject", "message": "not b"}]
    }
    shot(page, "approval-two-calls-sent")


def test_server_killed_mid_run_page_reconnects_without_duplicates(
    crash_page: Page, server: ServerProcess
) -> None:
    page = crash_page
    thread_id = start_task(page, "counter", n="4", delay="1.0")
    ok = page.locator(".ev-tool[data-state=ok]")
    expect(ok).to_have_count(1, timeout=15_000)  # line 1 done, lines 2 and 3 under way
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")

    server.kill()
    expect(page.locator("#conn")).to_have_attribute("data-state", "reconnecting", timeout=10_000)
    expect(page.locator("#conn")).to_contain_text("reconnecting…")
    expect(page.locator("#banner")).to_contain_text("unreachable", timeout=10_000)
    shot(page, "reconnecting")

    server.start()
    end = page.locator(".ev-end")
    expect(end).to_have_attribute("data-status", "success", timeout=30_000)
    expect(end).to_contain_text("task verified")
    expect(page.locator("#banner")).to_be_hidden()
    expect(page.locator(".ev-resumed")).to_have_text(
        re.compile(r"resumed after a crash \(attempt 2\)")
    )
    expect(page.locator(".run")).to_have_count(1)  # same run id
    expect(page.locator(".ev-tool")).to_have_count(4)
    expect(ok).to_have_count(4)
    assert_no_duplicate_entries(page)
    states = page.evaluate("window.__conn")
    first_reconnecting = states.index("reconnecting")
    assert "live" in states[first_reconnecting:], states
    assert sorted(workspace_file(server, thread_id, "counter.txt").split(), key=int) == [
        "1",
        "2",
        "3",
        "4",
    ]
    shot(page, "after-restart")
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_SCREENSHOT), full_page=True)


def test_died_thread_is_resumed_with_the_button(crash_page: Page, server: ServerProcess) -> None:
    page = crash_page
    """Kill the server mid-run, restart it allowing one attempt without progress and kill the
    takeover before it saves anything (it runs the 1.5 s call again): the next takeover ends the
    run in error (attempts exhausted), the page says "died — resumable", and its button resumes
    it."""
    thread_id = start_task(page, "counter", n="3", delay="1.5")
    expect(page.locator(".ev-tool")).to_have_count(1, timeout=15_000)
    server.kill()
    expect(page.locator("#conn")).to_have_attribute("data-state", "reconnecting", timeout=10_000)

    server.env["THREADLINE_MAX_ATTEMPTS"] = "1"
    server.start()
    expect(page.locator("#c-attempt")).to_have_text("2", timeout=30_000)
    server.kill()
    server.start()
    first = page.locator(".run").nth(0)
    expect(first.locator(".ev-end")).to_have_attribute("data-status", "error", timeout=30_000)
    expect(first.locator(".ev-error")).to_contain_text("AttemptsExhausted")
    expect(thread_badge(page, thread_id)).to_have_text("died — resumable", timeout=10_000)
    expect(page.locator("#view-status")).to_have_text("died — resumable")
    resume = page.get_by_role("button", name="Resume from last checkpoint")
    expect(resume).to_be_visible()
    expect(page.get_by_role("button", name="Cancel run")).to_be_hidden()
    shot(page, "died-resumable")

    resume.focus()
    page.keyboard.press("Enter")  # keyboard works
    runs = page.locator(".run")
    expect(runs).to_have_count(2)
    second = runs.nth(1)
    expect(second).to_contain_text("resume from last checkpoint")
    expect(second.locator(".ev-end")).to_have_attribute("data-status", "success", timeout=30_000)
    expect(second.locator(".ev-end")).to_contain_text("task verified")
    expect(thread_badge(page, thread_id)).to_have_text("idle", timeout=10_000)
    expect(resume).to_be_hidden()
    assert_no_duplicate_entries(page)
    assert sorted(workspace_file(server, thread_id, "counter.txt").split(), key=int) == [
        "1",
        "2",
        "3",
    ]
    shot(page, "resumed")


def test_cancel_free_text_and_narrow_window(browser: Browser, shared_server: ServerProcess) -> None:
    """At 380 px everything is reachable; cancel stops an active run; free text runs; the task
    menu falls back to the built-in list when the server has no ``GET /tasks``."""
    not_found = '{"detail": "No such endpoint."}'
    no_tasks = {
        "**/tasks": lambda route: route.fulfill(
            status=404, content_type="application/json", body=not_found
        )
    }
    with open_page(browser, shared_server, width=380, height=800, routes=no_tasks) as page:
        options = page.locator("#task-kind option").evaluate_all("els => els.map(e => e.value)")
        assert {"counter", "greet", "fix_test"} <= set(options), options
        thread_id = start_task(page, "counter", n="6", delay="1.0")
        cancel = page.get_by_role("button", name="Cancel run")
        expect(cancel).to_be_visible(timeout=10_000)
        expect(page.locator(".ev-tool")).to_have_count(1, timeout=15_000)
        shot(page, "narrow-running")
        cancel.click()
        end = page.locator(".ev-end")
        expect(end).to_have_attribute("data-status", "interrupted", timeout=15_000)
        expect(end).to_contain_text("cancelled on request")
        expect(thread_badge(page, thread_id)).to_have_text("idle", timeout=10_000)
        expect(cancel).to_be_hidden()
        # Nothing overflows sideways at this width.
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page is {overflow}px wider than a 380px window"
        shot(page, "narrow-cancelled")

        # Free text: the offline model says it is not a language model and how to configure one.
        page.get_by_label("Task", exact=True).select_option("__free_text__")
        page.get_by_label("Instruction").fill("Summarize the README")
        page.get_by_role("button", name="Start").click()
        expect(page.locator("#view-title")).to_have_text("“Summarize the README”")
        expect(page.locator(".ev-end")).to_have_attribute("data-status", "success", timeout=15_000)
        expect(page.locator(".ev-step").first).to_contain_text("OPENAI_API_KEY")
        expect(page.locator(".run")).to_contain_text("Summarize the README")


def test_the_page_asks_for_a_key_and_streams_with_it(
    browser: Browser, database_url: str, tmp_path: Path
) -> None:
    """With THREADLINE_AUTH=keys the page asks for a key, keeps it for the tab's session, and
    its EventSource streams carry it (a cookie: EventSource cannot set headers)."""
    from tests.utils.keys import create_key

    srv = make_server(database_url, tmp_path, "keys")
    srv.env["THREADLINE_AUTH"] = "keys"
    with running(srv):
        key = create_key(srv.data_dir, database_url, "ada")
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(RECORD_CONNECTION)
        pg = context.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda err: errors.append(str(err)))
        try:
            pg.goto(srv.url + "/")
            dialog = pg.locator("#key-dialog")
            expect(dialog).to_be_visible()
            pg.locator("#key-input").fill("tl_0000_wrong")
            pg.locator("#key-submit").click()
            expect(dialog).to_be_visible()  # refused: asked again, saying so
            expect(pg.locator("#key-error")).to_contain_text("refused")
            pg.locator("#key-input").fill(key)
            pg.locator("#key-submit").click()
            expect(dialog).to_be_hidden()
            expect(pg.locator("#model")).to_contain_text("offline")
            thread_id = start_task(pg, "counter", n="2", delay="0")
            end = pg.locator(".ev-end")
            expect(end).to_have_attribute("data-status", "success", timeout=20_000)
            expect(pg.locator(".ev-tool[data-state=ok]")).to_have_count(2)
            # A reload keeps the key for this tab: no question, the stored run replays.
            pg.reload()
            expect(pg.locator(f'#threads li[data-thread-id="{thread_id}"]')).to_be_visible()
            expect(dialog).to_be_hidden()
            shot(pg, "keys-counter")
        finally:
            context.close()
        assert not errors, f"JavaScript errors on the page: {errors}"
        # Without the key the API refuses: the page's access came from the key alone.
        assert httpx.get(srv.url + "/info").status_code == 401
