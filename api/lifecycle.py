"""The one place the service's long-lived parts start and stop: runtime (database, pool,
checkpointer, graphs), the hub, the workers, then the :class:`~api.runs.service.Service`; stopped in
reverse order, also when a later part fails to start. The app's lifespan and the tests use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from api.auth.access import Access
from api.builtin_agent import BUILTIN_ASSISTANT
from api.builtin_agent.wiring import open_agent
from api.durable.hub import Hub
from api.engine.a2a_push import A2aPushDelivery
from api.engine.runtime import Runtime, open_runtime
from api.engine.webhooks import WebhookDelivery
from api.engine.worker import Workers
from api.http.a2a.push import renderer as a2a_renderer
from api.platform.settings import Settings
from api.project.graphs import load_graphs
from api.runs.assistant_service import ensure_defaults
from api.runs.scheduler import Scheduler
from api.runs.service import Service


@asynccontextmanager
async def open_serving_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """The runtime (``api.engine.runtime``) serving the built-in agent, the default graph (its
    own settings, ``agent.settings``, are read where it is opened: ``open_agent``)."""
    async with open_runtime(settings) as runtime:
        graph, adapter = await open_agent(settings, runtime.saver, runtime.store)
        runtime.serve(BUILTIN_ASSISTANT, graph, adapter)
        runtime.default_graph = BUILTIN_ASSISTANT
        yield runtime


async def add_config_graphs(runtime: Runtime, settings: Settings) -> None:
    """The graphs of ``THREADLINE_CONFIG``, beside the built-in agent."""
    if not settings.config:
        return
    extra, factories = await load_graphs(settings.config, runtime.saver, runtime.store)
    if BUILTIN_ASSISTANT in extra:
        raise ValueError(
            f"{settings.config} defines a graph named {BUILTIN_ASSISTANT!r}, which is the "
            "built-in agent's id; rename it"
        )
    runtime.graphs.update(extra)
    runtime.factories.update(factories)


@asynccontextmanager
async def open_service(
    settings: Settings,
    access: Access | None = None,
    *,
    runtime: Runtime | None = None,
    workers: bool = True,
    webhooks: bool = True,
) -> AsyncIterator[Service]:
    """A started service. ``runtime``: use an open one (the caller closes it); ``workers``
    False: runs are queued but nothing here executes them, no schedule fires and no webhook is
    sent; ``webhooks`` False: none is accepted or sent."""
    async with AsyncExitStack() as stack:
        if runtime is None:
            runtime = await stack.enter_async_context(open_serving_runtime(settings))
            await add_config_graphs(runtime, settings)
        await ensure_defaults(runtime)  # each served graph's default assistant
        hub = Hub(runtime.database.url, on_lost=runtime.pool.health.fault)
        await hub.start()
        stack.push_async_callback(hub.stop)
        service = Service(runtime=runtime, hub=hub, access=access or Access(), webhooks=webhooks)
        if workers:
            service.workers = Workers(runtime=runtime, hub=hub)
            await service.workers.start()
            stack.push_async_callback(service.workers.stop)
            scheduler = Scheduler(runtime.pool, hub, settings.cron_poll_seconds)
            await scheduler.start()
            stack.push_async_callback(scheduler.stop)
        if workers and webhooks:
            delivery = WebhookDelivery(runtime.pool, settings)
            await delivery.start()
            stack.push_async_callback(delivery.stop)
            push = A2aPushDelivery(runtime.pool, settings, a2a_renderer(service))
            await push.start()
            stack.push_async_callback(push.stop)
        yield service
