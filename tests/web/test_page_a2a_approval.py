"""The page answers an approval that a task started over A2A asked for: the thread is listed, its
A2A run's timeline shows the request, the card approves it through the approvals API (audited
``via: http``), the page follows the run that resumed it, and the A2A task (the official
``a2a-sdk`` client) follows that run to completed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests.api.test_a2a import a2a, data_message
from tests.utils.db import fresh_database
from tests.utils.server import ServerProcess
from tests.utils.tasks import greet
from tests.web.pages import CHROMIUM, make_server, open_page, running

if TYPE_CHECKING:
    from playwright.sync_api import Browser

if not CHROMIUM.exists():  # pragma: no cover - depends on the machine
    pytest.skip("Debian Chromium (/usr/bin/chromium) is not installed", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

T = TypeVar("T")


@pytest.fixture(scope="module")
def server(pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("web-a2a")
    with fresh_database(pg_admin_url) as url, running(make_server(url, tmp, "a2a")) as srv:
        yield srv


def off_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run an async client call on a thread of its own (Playwright's sync API owns this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def start_task(url: str) -> Task:
    async with a2a(url, streaming=False) as client:
        [reply] = [e async for e in client.send_message(data_message(greet()))]
    return reply.task


async def get_task(url: str, task_id: str) -> Task:
    async with a2a(url, streaming=False) as client:
        task: Task = await client.get_task(GetTaskRequest(id=task_id))
        return task


def test_an_a2a_task_is_approved_on_the_page(browser: Browser, server: ServerProcess) -> None:
    task = off_loop(start_task(server.url))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
    thread_id = task.context_id
    [asked] = [p["data"] for p in MessageToDict(task.status.message)["parts"] if "data" in p]
    with open_page(browser, server) as page:
        listed = page.locator(f'#threads li[data-thread-id="{thread_id}"]')
        expect(listed).to_be_visible(timeout=15_000)
        listed.locator("button.thread").click()
        # The A2A run's timeline shows the request; the card asks about the same interrupt.
        request = page.locator(".run").nth(0).locator(".ev-interrupt")
        expect(request).to_have_attribute("data-interrupt-id", asked["interrupt_id"])
        card = page.locator(".approval")
        expect(card).to_have_count(1, timeout=15_000)
        expect(card).to_have_attribute("data-interrupt-id", asked["interrupt_id"])
        expect(card).to_contain_text("write_file")
        expect(card).to_contain_text("Hello, Ada!")
        card.get_by_role("button", name="Approve", exact=True).click()
        expect(card).to_have_count(0)
        runs = page.locator(".run")
        expect(runs).to_have_count(2)
        expect(runs.nth(1).locator(".ev-end")).to_contain_text("task verified", timeout=15_000)
        expect(request).to_contain_text("approved")
    greeting = httpx.get(f"{server.url}/threads/{thread_id}/workspace/greeting.txt", timeout=10)
    assert greeting.text == "Hello, Ada!\n"
    audit = httpx.get(f"{server.url}/threads/{thread_id}/audit", timeout=10).json()
    [decision] = [e for e in audit if e["kind"] == "decision"]
    assert decision["actor"] == "anonymous"
    assert decision["detail"] == {
        "interrupt_id": asked["interrupt_id"],
        "answer": {"decisions": [{"type": "approve"}]},
        "via": "http",
    }
    assert len([e for e in audit if e["kind"] == "tool" and e["tool"] == "write_file"]) == 1
    done = off_loop(get_task(server.url, task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
    assert MessageToDict(done.metadata)["threadline"]["run_id"] == decision["run_id"]
