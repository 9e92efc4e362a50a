"""What the routes do, apart from HTTP: threads, runs, state, waiting, approvals."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from langgraph.pregel import Pregel

from agent.approval import parse_decision
from api import builtin_agent
from api.auth.access import Access, Scope
from api.auth.context import caller
from api.database import Pool
from api.errors import Conflict, Invalid, NotFound
from api.hub import Hub
from api.runtime import BUILTIN_ASSISTANT, Runtime
from api.schemas import RunCreate
from api.serde import to_jsonable
from api.store import audit, events, runs, threads
from api.store.rows import run_out

INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")


@dataclass
class Service:
    runtime: Runtime
    hub: Hub
    access: Access = field(default_factory=Access)
    """Who may do what (``api.auth.access``); the caller comes from ``api.auth.context``."""

    @property
    def pool(self) -> Pool:
        return self.runtime.pool

    def graph(self, assistant_id: str) -> Pregel:
        try:
            return self.runtime.graphs[assistant_id]
        except KeyError:
            raise NotFound(
                f"No assistant {assistant_id!r}. Known assistants: "
                f"{', '.join(sorted(self.runtime.graphs))}."
            ) from None

    # -- threads -------------------------------------------------------------------------------

    async def scope(self, action: str, value: dict[str, Any] | None = None) -> Scope:
        """The caller's scope for ``threads.<action>`` (the handler may edit ``value``)."""
        return await self.access.scope(caller(), action, value)

    async def authorize(self, resource: str, action: str, value: dict[str, Any]) -> None:
        """A resource other than threads (assistants): its handler may refuse (403)."""
        await self.access.check(caller(), resource, action, value)

    def actor(self) -> str:
        """Who the audit log names for what this request does."""
        user = caller()
        return user.identity if user.is_authenticated else "anonymous"

    async def thread(self, thread_id: str, action: str = "read") -> dict[str, Any]:
        """The thread, if the caller may ``action`` it; another tenant's thread is not found."""
        async with self.pool.connection() as conn:
            found = await threads.get(conn, thread_id)
        if found is None or not (await self.scope(action, {"thread_id": thread_id})).allows(found):
            raise NotFound(f"No thread {thread_id!r}. Create it with POST /threads first.")
        return found

    async def create_thread(
        self, thread_id: str, metadata: dict[str, Any], if_exists: str
    ) -> dict[str, Any]:
        """A new thread owned by the caller (the auth handler may add metadata); an existing
        id is the caller's thread with ``do_nothing``, else 409 (another tenant's too)."""
        value: dict[str, Any] = {
            "thread_id": thread_id,
            "metadata": dict(metadata),
            "if_exists": if_exists,
        }
        await self.scope("create", value)
        async with self.pool.connection() as conn:
            created = await threads.create(
                conn, thread_id, value.get("metadata") or {}, self.access.owner_of_new(caller())
            )
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
            )

    def thread_config(self, thread_id: str, checkpoint: dict[str, Any] | None = None) -> Any:
        return {"configurable": {"thread_id": thread_id, **(checkpoint or {})}}

    async def state(self, thread_id: str, assistant_id: str | None = None) -> Any:
        """The thread's current state, from the checkpointer (no graph needed to read it)."""
        await self.thread(thread_id)
        graph = self.graph(assistant_id or await self._assistant_of(thread_id))
        return await graph.aget_state(self.thread_config(thread_id))

    async def _assistant_of(self, thread_id: str) -> str:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT assistant_id FROM runs WHERE thread_id = %s"
                " ORDER BY created_at DESC LIMIT 1",
                (thread_id,),
            )
            row = await cur.fetchone()
        return row["assistant_id"] if row else "agent"

    # -- runs ----------------------------------------------------------------------------------

    async def create_run(self, thread_id: str, body: RunCreate) -> dict[str, Any]:
        """Validate, then queue the run in one transaction with the check for active runs.

        A resume records each answered interrupt in ``approvals`` in that transaction: a second
        answer to the same interrupt, concurrent or later, gets 409 and queues nothing. The run
        and its decisions are the caller's: the audit log names them, the graph sees them as
        ``langgraph_auth_user``.
        """
        self.graph(body.assistant_id)
        user, actor = caller(), self.actor()
        exists = await self._visible_for_run(thread_id, body)
        kwargs = {
            "input": body.input,
            "command": body.command.model_dump(exclude_none=True) if body.command else None,
            "config": body.config or {},
            "stream_mode": body.modes(),
            "on_disconnect": body.on_disconnect,
        }
        if self.access.enabled:
            kwargs["auth_user"] = user.as_dict()
        try:
            orjson.dumps(kwargs)
        except TypeError as err:
            raise Invalid(f"the run's input must be JSON: {err}") from None
        builtin_agent.check_private_config(body.config)
        superseded: list[str] = []
        if body.assistant_id == BUILTIN_ASSISTANT:
            superseded = await self._check_agent_run(thread_id, body, kwargs["command"])
        answers: dict[str, Any] = {}
        if body.command and body.command.resume is not None:
            answers = await self.check_resume(thread_id, body.assistant_id, body.command.resume)
        async with self.pool.connection() as conn, conn.transaction():
            active = await runs.lock_thread(conn, thread_id)
            if active is None:
                if exists or body.if_not_exists != "create":
                    raise NotFound(
                        f"No thread {thread_id!r}. Create it with POST /threads, or send "
                        '"if_not_exists": "create".'
                    )
                value: dict[str, Any] = {"thread_id": thread_id, "metadata": {}}
                await self.scope("create", value)
                owner = self.access.owner_of_new(user)
                if await threads.create(conn, thread_id, value["metadata"], owner) is None:
                    raise Conflict(f"Thread {thread_id!r} was created meanwhile; try again.")
                active = []
            if answers:
                # Before the active-run check: a concurrent second answer would otherwise be told
                # to wait for (or enqueue behind) the run its twin just started.
                await self._refuse_answered(conn, thread_id, list(answers))
            if active and body.multitask_strategy == "reject":
                raise Conflict(
                    f"Thread {thread_id!r} already has an active run ({active[0]['run_id']}, "
                    f"{active[0]['status']}). Wait for it "
                    f"(GET .../runs/{active[0]['run_id']}/join), "
                    'cancel it, or send "multitask_strategy": "enqueue".'
                )
            run = await runs.insert(
                conn,
                thread_id=thread_id,
                assistant_id=body.assistant_id,
                kwargs=kwargs,
                metadata=body.metadata,
                multitask_strategy=body.multitask_strategy,
            )
            for interrupt_id in superseded:
                # A new message closes the pending approvals as rejected; the agent gives the
                # model a tool message for each. Already answered (a racing resume): kept.
                await audit.record_decision(
                    conn,
                    thread_id,
                    interrupt_id,
                    builtin_agent.supersede_answer(),
                    run["run_id"],
                    actor,
                )
            for interrupt_id, answer in answers.items():
                if not await audit.record_decision(
                    conn, thread_id, interrupt_id, answer, run["run_id"], actor
                ):
                    raise Conflict(
                        f"Interrupt {interrupt_id} was already answered; a decision is applied "
                        f"once. GET /threads/{thread_id}/state shows what is pending now."
                    )
        # Wake this process's claim loop now rather than when the notification comes back.
        self.hub.runs_changed.set()
        return run

    async def _visible_for_run(self, thread_id: str, body: RunCreate) -> bool:
        """Whether the thread exists; 404 when it is not the caller's (a resume is an answer to
        its approvals: reviewers may, and an approve permission binds)."""
        try:
            if body.command and body.command.resume is not None:
                found = await self.thread(thread_id, "read")
                scope = await self.access.approval_scope(caller(), {"thread_id": thread_id})
                if not scope.allows(found):
                    raise NotFound(f"No thread {thread_id!r}.")
            else:
                await self.thread(thread_id, "create_run")
        except NotFound:
            async with self.pool.connection() as conn:
                if await threads.get(conn, thread_id) is not None:
                    raise  # someone else's: not found, and never created over
            return False
        return True

    async def _check_agent_run(
        self, thread_id: str, body: RunCreate, command: dict[str, Any] | None
    ) -> list[str]:
        """The built-in agent's checks (``api.builtin_agent``); returns the pending approval
        interrupts a new input closes."""
        rt = self.runtime
        builtin_agent.check_command(command)
        builtin_agent.check_input(body.input, rt.tasks)
        async with self.pool.connection() as conn:
            found = await threads.get(conn, thread_id)
        builtin_agent.check_run_policy(
            body.config,
            policy=rt.policy,
            tools=rt.tools,
            task_rules=builtin_agent.task_rules_for(
                rt.tasks, body.input, found["values"] if found else None
            ),
        )
        if body.input is None or found is None or found["status"] != "interrupted":
            return []
        state = await self.graph(BUILTIN_ASSISTANT).aget_state(self.thread_config(thread_id))
        return [
            i.id
            for i in state.interrupts
            if isinstance(i.value, dict) and i.value.get("type") == "approval"
        ]

    @staticmethod
    async def _refuse_answered(conn: Any, thread_id: str, interrupt_ids: list[str]) -> None:
        cur = await conn.execute(
            "SELECT interrupt_id FROM approvals WHERE thread_id = %s AND interrupt_id = ANY(%s)",
            (thread_id, interrupt_ids),
        )
        done = [row["interrupt_id"] for row in await cur.fetchall()]
        if done:
            raise Conflict(
                f"Interrupt(s) {done} were already answered; a decision is applied once. "
                f"GET /threads/{thread_id}/state shows what is pending now."
            )

    async def check_resume(self, thread_id: str, assistant_id: str, resume: Any) -> dict[str, Any]:
        """A resume must answer pending interrupts (409 otherwise, naming the pending ids).

        Returns interrupt id → answer; approval answers are validated (422 when malformed).
        """
        await self.thread(thread_id)
        state = await self.graph(assistant_id).aget_state(self.thread_config(thread_id))
        by_id = {i.id: i for i in state.interrupts}
        pending = list(by_id)
        if not pending:
            raise Conflict(
                f"Thread {thread_id!r} has no pending interrupt to resume. Start a run with "
                "'input' instead."
            )
        is_map = (
            isinstance(resume, dict)
            and bool(resume)
            and all(isinstance(k, str) and INTERRUPT_ID.fullmatch(k) for k in resume)
        )
        if is_map:
            unknown = [k for k in resume if k not in pending]
            if unknown:
                raise Conflict(
                    f"Interrupt id(s) {unknown} are not pending on this thread (already answered "
                    f"or unknown). Pending interrupt ids: {pending}."
                )
        elif len(pending) > 1:
            raise Conflict(
                f"{len(pending)} interrupts are pending ({pending}): send command.resume as a map "
                "from interrupt id to its answer."
            )
        answers = dict(resume) if is_map else {pending[0]: resume}
        for interrupt_id, answer in answers.items():
            value = by_id[interrupt_id].value
            if isinstance(value, dict) and value.get("type") == "approval":
                tool = self.runtime.tools.get(str(value.get("tool")))
                try:
                    parse_decision(answer, tool)
                except ValueError as err:
                    raise Invalid(f"Invalid decision for interrupt {interrupt_id}: {err}") from None
        return answers

    async def run(self, thread_id: str, run_id: str, action: str = "read") -> dict[str, Any]:
        await self.thread(thread_id, action)
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
                await events.append_unfenced(
                    conn,
                    run_id,
                    "end",
                    orjson.dumps(
                        {"run_id": run_id, "status": "interrupted", "error": cancelled["error"]}
                    ).decode(),
                    cancelled["attempt"],
                )
        if cancelled is None:
            raise Conflict(
                f"Run {run_id} already finished with status {current['status']!r}; "
                "there is nothing to cancel."
            )
        return cancelled

    async def wait_for_end(self, run_id: str) -> None:
        """Return once the run's ``end`` event is stored."""
        while True:
            waiter = self.hub.subscribe(run_id)
            try:
                async with self.pool.connection() as conn:
                    cur = await conn.execute(
                        "SELECT 1 FROM run_events WHERE run_id = %s AND event = 'end'",
                        (uuid.UUID(run_id),),
                    )
                    if await cur.fetchone():
                        return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.wait(), timeout=2.0)
            finally:
                self.hub.unsubscribe(run_id, waiter)

    async def final_values(self, thread_id: str, run: dict[str, Any]) -> Any:
        """What ``/wait`` and ``/join`` return: the thread's values (plus pending interrupts)."""
        state = await self.state(thread_id, run["assistant_id"])
        out = to_jsonable(state.values)
        if state.interrupts and isinstance(out, dict):
            out["__interrupt__"] = to_jsonable(list(state.interrupts))
        return out

    async def refreshed_run(self, thread_id: str, run_id: str) -> dict[str, Any]:
        async with self.pool.connection() as conn:
            cur = await conn.execute("SELECT * FROM runs WHERE run_id = %s", (uuid.UUID(run_id),))
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"No run {run_id!r} on thread {thread_id!r}.")
        return run_out(row)
