"""What every part of the runs layer shares (:class:`Core`): the runtime, the hub, who may do
what, this process's workers; threads as the caller may see them, their state, a run's end.
:class:`~api.runs.service.Service` adds creating runs (``api.runs.run_create``)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import orjson
from langgraph.pregel import Pregel

from api.auth.access import Access, Scope
from api.auth.context import caller
from api.durable.hub import Hub
from api.durable.run_events import end_event
from api.engine.runtime import Runtime
from api.engine.worker import Workers
from api.platform.database import Pool
from api.platform.db_health import is_database_fault
from api.platform.errors import Conflict, NotFound
from api.platform.serde import to_jsonable
from api.runs.resume import answers_for
from api.store import assistants, events, kept_state, runs, threads


@dataclass
class Core:
    runtime: Runtime
    hub: Hub
    access: Access = field(default_factory=Access)
    """Who may do what (``api.auth.access``); the caller comes from ``api.auth.context``."""
    workers: Workers | None = None
    """This process's workers (``api.lifecycle`` starts them), if it executes runs."""
    webhooks: bool = True
    """False: a run or schedule with a ``webhook`` is refused (``"http": {"disable_webhooks":
    true}`` in the project's ``langgraph.json``)."""

    @property
    def pool(self) -> Pool:
        return self.runtime.pool

    def graph(self, graph_id: str) -> Pregel[Any, Any, Any, Any]:
        """A served graph by its id (an assistant names one: ``api.runs.assistant_access``)."""
        try:
            return self.runtime.graphs[graph_id]
        except KeyError:
            raise NotFound(
                f"No graph {graph_id!r}. Served graphs: {', '.join(sorted(self.runtime.graphs))}."
            ) from None

    # -- threads -------------------------------------------------------------------------------

    async def scope(self, action: str, value: dict[str, Any] | None = None) -> Scope:
        """The caller's scope for ``threads.<action>`` (the handler may edit ``value``)."""
        return await self.access.scope(caller(), action, value)

    async def authorize(self, resource: str, action: str, value: dict[str, Any]) -> None:
        """A resource its handler alone guards (crons): the handler may refuse (403)."""
        await self.access.check(caller(), resource, action, value)

    def actor(self) -> str:
        """Who the audit log names for what this request does."""
        user = caller()
        return user.identity if user.is_authenticated else "anonymous"

    async def thread(
        self,
        thread_id: str,
        action: str = "read",
        *,
        include_ttl: bool = False,
        values: bool = True,
    ) -> dict[str, Any]:
        """The thread, if the caller may ``action`` it; another tenant's thread is not found.
        ``include_ttl``: with its ``ttl``, if it has one; ``values=False``: an access check,
        which leaves the thread's values unread (None)."""
        async with self.pool.connection() as conn:
            found = await threads.get(conn, thread_id, include_ttl=include_ttl, values=values)
        if found is None or not (await self.scope(action, {"thread_id": thread_id})).allows(found):
            raise NotFound(f"No thread {thread_id!r}. Create it with POST /threads first.")
        return found

    async def create_thread(
        self,
        thread_id: str,
        metadata: dict[str, Any],
        if_exists: str,
        ttl: tuple[str, float] | None = None,
    ) -> dict[str, Any]:
        """A new thread owned by the caller (the auth handler may add metadata), with ``ttl``
        (else the server's default); an existing id is the caller's thread with
        ``do_nothing``, else 409 (another tenant's too)."""
        value: dict[str, Any] = {
            "thread_id": thread_id,
            "metadata": dict(metadata),
            "if_exists": if_exists,
        }
        await self.scope("create", value)
        async with self.pool.connection() as conn:
            owner = self.access.owner_of_new(caller())
            created = await threads.create(conn, thread_id, value.get("metadata") or {}, owner, ttl)
        if created is not None:
            return created
        if if_exists == "do_nothing":
            with contextlib.suppress(NotFound):
                return await self.thread(thread_id)
        raise Conflict(
            f"Thread {thread_id!r} already exists. Use it, pick another id, or send "
            '"if_exists": "do_nothing".'
        )

    async def search_threads(self, body: Any) -> list[dict[str, Any]]:
        """``POST /threads/search`` within the caller's scope."""
        value = {
            "metadata": body.metadata or {},
            "status": body.status,
            "limit": body.limit,
            "offset": body.offset,
        }
        scope = await self.scope("search", value)
        async with self.pool.connection() as conn:
            return await threads.search(
                conn,
                status=body.status,
                metadata=value["metadata"],
                limit=body.limit,
                offset=body.offset,
                scope=scope.where("t"),
                values=getattr(body, "values", None),
                ids=getattr(body, "ids", None),
                sort_by=getattr(body, "sort_by", None),
                sort_order=getattr(body, "sort_order", None),
            )

    async def count_threads(self, body: Any) -> int:
        """``POST /threads/count``: what ``search_threads`` would find, within the same scope."""
        value = {"metadata": body.metadata or {}, "values": body.values, "status": body.status}
        scope = await self.scope("search", value)
        async with self.pool.connection() as conn:
            return await threads.count(
                conn,
                status=body.status,
                metadata=value["metadata"],
                values=body.values,
                scope=scope.where("t"),
            )

    def thread_config(self, thread_id: str, checkpoint: dict[str, Any] | None = None) -> Any:
        return {"configurable": {"thread_id": thread_id, **(checkpoint or {})}}

    async def state(
        self, thread_id: str, graph_id: str | None = None, *, subgraphs: bool = False
    ) -> Any:
        """The thread's current state, from the checkpointer (no graph needed to read it)."""
        await self.thread(thread_id, values=False)
        graph = self.graph(graph_id or await self.assistant_of(thread_id))
        return await graph.aget_state(self.thread_config(thread_id), subgraphs=subgraphs)

    async def kept_state(self, thread_id: str) -> kept_state.KeptState | None:
        """The thread's current state from its stored values, when they are its latest
        checkpoint's (``api.store.kept_state``); None: read it with :meth:`state`."""
        await self.thread(thread_id, values=False)
        async with self.pool.connection() as conn:
            return await kept_state.kept_state(conn, thread_id)

    async def assistant_of(self, thread_id: str) -> str:
        """The graph of the thread: its latest run's, else the one its metadata names (a
        copy's), else the runtime's default graph (the built-in agent)."""
        async with self.pool.connection() as conn:
            latest = await runs.latest_assistant(conn, thread_id)
            found = latest["graph_id"] if latest else await runs.labelled_graph(conn, thread_id)
        if found in self.runtime.graphs:
            return found
        if self.runtime.default_graph is None:
            raise NotFound(f"Thread {thread_id!r} has no run yet; name its graph (graph_id).")
        return self.runtime.default_graph

    async def latest_assistant(self, thread_id: str) -> str:
        """The assistant a run continuing the thread is created with: its latest run's while it
        exists (a run from before assistants were stored names its graph), else the graph's
        default (the thread's graph named as an assistant)."""
        async with self.pool.connection() as conn:
            latest = await runs.latest_assistant(conn, thread_id)
            key = assistants.as_uuid(latest["assistant_id"]) if latest else None
            row = await assistants.get(conn, key) if key is not None else None
            if row is not None and row["graph_id"] in self.runtime.graphs:
                return str(key)
        return await self.assistant_of(thread_id)

    # -- runs ----------------------------------------------------------------------------------

    async def check_resume(self, thread_id: str, graph_id: str, resume: Any) -> dict[str, Any]:
        """A resume must answer pending interrupts (409 otherwise, naming the pending ids).

        Returns interrupt id → answer; approval answers are validated (422 when malformed).
        """
        await self.thread(thread_id, values=False)
        state = await self.graph(graph_id).aget_state(self.thread_config(thread_id))
        return answers_for(thread_id, state.interrupts, resume, self.runtime.adapter(graph_id))

    async def active_run(self, thread_id: str) -> dict[str, Any] | None:
        """The thread's oldest pending or running run, if any."""
        async with self.pool.connection() as conn:
            return await runs.active(conn, thread_id)

    async def run(self, thread_id: str, run_id: str, action: str = "read") -> dict[str, Any]:
        await self.thread(thread_id, action, values=False)
        async with self.pool.connection() as conn:
            found = await runs.get(conn, thread_id, run_id)
        if found is None:
            raise NotFound(f"No run {run_id!r} on thread {thread_id!r}.")
        return found

    async def cancel(self, thread_id: str, run_id: str) -> dict[str, Any]:
        current = await self.run(thread_id, run_id, "update")
        async with self.pool.connection() as conn:
            cancelled = await runs.request_cancel(conn, run_id)
            if cancelled and cancelled["status"] == "interrupted":
                # Never claimed: no worker will write its stream, so end it here.
                end = end_event(run_id, "interrupted", cancelled["error"])
                await events.append_unfenced(
                    conn, run_id, "end", orjson.dumps(end).decode(), cancelled["attempt"]
                )
        if cancelled is None:
            raise Conflict(
                f"Run {run_id} already finished with status {current['status']!r}; "
                "there is nothing to cancel."
            )
        return cancelled

    async def wait_for_end(self, run_id: str) -> None:
        """Return once the run's ``end`` event is stored; 404 if the run is removed meanwhile
        (a rollback removes the runs it cancelled)."""
        while True:
            waiter = self.hub.subscribe(run_id)
            try:
                try:
                    async with self.pool.connection() as conn:
                        if await events.has_end(conn, run_id):
                            return
                        if await runs.by_id(conn, run_id) is None:
                            raise NotFound(
                                f"Run {run_id} was removed (rolled back) before it ended."
                            )
                except Exception as err:  # the run goes on once the database is back: wait
                    if not is_database_fault(err):
                        raise
                    self.pool.health.fault(err)
                    await asyncio.sleep(0.2)  # a connection lost with the server up: soon
                    await self.pool.health.wait_up()
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.wait(), timeout=2.0)
            finally:
                self.hub.unsubscribe(run_id, waiter)

    async def final_values(self, thread_id: str, run: dict[str, Any]) -> Any:
        """What ``/wait`` and ``/join`` return: the thread's values (plus pending interrupts)."""
        state = await self.state(thread_id, run["graph_id"])
        values = state.values
        output = self.graph(run["graph_id"]).output_channels
        if isinstance(values, dict) and isinstance(output, list | tuple):
            # The graph's output schema, as LangGraph Server's last values chunk holds it.
            values = {k: v for k, v in values.items() if k in output}
        out = to_jsonable(values)
        if state.interrupts and isinstance(out, dict):
            out["__interrupt__"] = to_jsonable(list(state.interrupts))
        return out

    async def refreshed_run(self, thread_id: str, run_id: str) -> dict[str, Any]:
        async with self.pool.connection() as conn:
            found = await runs.by_id(conn, run_id)
        if found is None:
            raise NotFound(f"No run {run_id!r} on thread {thread_id!r}.")
        return found
