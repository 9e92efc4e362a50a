"""What the browser tests share: the servers they start and the page opened on one of them.

Playwright is imported lazily, so that importing this module never fails on a machine without
it (the test modules skip themselves then).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.utils.processes import kill_strays
from tests.utils.server import ServerProcess

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium, which the tests drive (skipped without it)."""
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]

RECORD_CONNECTION = """
window.__conn = [];
document.addEventListener("DOMContentLoaded", () => {
  const el = document.getElementById("conn");
  const record = () => {
    const s = el.dataset.state;
    if (window.__conn[window.__conn.length - 1] !== s) window.__conn.push(s);
  };
  record();
  new MutationObserver(record).observe(el, { attributes: true, attributeFilter: ["data-state"] });
});
"""
"""An init script: ``window.__conn`` records every state the connection indicator went through."""


def make_server(
    database_url: str,
    tmp: Path,
    name: str,
    *,
    env: Mapping[str, str] | None = None,
    config: Path | None = None,
) -> ServerProcess:
    """A ``threadline serve`` (not started) on ``database_url``, its data and log under ``tmp``;
    ``env`` adds variables (``OPENAI_*``, say), ``config`` a ``langgraph.json`` of more graphs."""
    return ServerProcess(
        database_url,
        tmp / "data",
        log_path=tmp / f"{name}.log",
        name=name,
        config=config,
        env={
            "THREADLINE_LOG_LEVEL": "warning",
            "THREADLINE_SHUTDOWN_GRACE_SECONDS": "1",
            **(env or {}),
        },
    )


@contextmanager
def running(srv: ServerProcess) -> Iterator[ServerProcess]:
    try:
        yield srv.start()
    finally:
        srv.stop()
        kill_strays(srv.data_dir)  # tool processes a killed server left behind


@contextmanager
def open_page(
    browser: Browser,
    srv: ServerProcess,
    width: int = 1280,
    height: int = 900,
    routes: dict[str, Any] | None = None,
    model: str = "offline",
) -> Iterator[Page]:
    """A fresh browser context on the page, once it names ``model``; fails the test on any
    JavaScript error."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_init_script(RECORD_CONNECTION)
    pg = context.new_page()
    for pattern, handler in (routes or {}).items():
        pg.route(pattern, handler)
    errors: list[str] = []
    pg.on("pageerror", lambda err: errors.append(str(err)))
    pg.goto(srv.url + "/")
    expect(pg.locator("#model")).to_contain_text(model)
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
