"""What the routes call, apart from HTTP: :class:`Service`, the shared :class:`~api.runs.core.Core`
(threads, their state, runs, waiting for one's end) and creating a run (``api.runs.run_create``)."""

from __future__ import annotations

from typing import Any

from api.contract import webhook_url
from api.contract.runs import RunCreate
from api.runs.assistant_config import RunAssistant
from api.runs.core import Core
from api.runs.run_create import create_run


class Service(Core):
    async def create_run(
        self,
        thread_id: str,
        body: RunCreate,
        *,
        threadless: bool = False,
        assistant: RunAssistant | None = None,
    ) -> dict[str, Any]:
        """Validate, then queue the run (``api.runs.run_create``); ``threadless``: on a new thread
        made for it, removed after it unless ``on_completion`` is ``keep``; ``assistant``: what
        ``body.assistant_id`` names, if the caller resolved it already."""
        await webhook_url.check(
            self.runtime.settings, body.webhook, enabled=self.webhooks
        )  # resolves: not under a lock
        return await create_run(self, thread_id, body, threadless=threadless, assistant=assistant)
