"""Queueing a run: the caller's access, the graph's checks, the answers a resume gives, and the
one transaction that checks for active runs, creates the thread if asked, and inserts the run.
A plain new run reads its thread in that transaction's first round trip, under the thread's
lock, and is checked there; a resume, a fork and a run that cancels others read it first. A
thread the run creates is inserted unread, with the run and the ``COMMIT``: two round trips.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from api.auth.context import caller, door
from api.contract.runs import RunCreate
from api.durable.run_events import end_event
from api.platform.database import pipelined_transaction
from api.platform.errors import Conflict, NotFound
from api.runs import assistant_access
from api.runs.assistant_config import RunAssistant
from api.runs.core import Core
from api.runs.run_checks import (
    Checked,
    ReadFirst,
    check_request,
    check_visible,
    reads_first,
    visible_for_run,
)
from api.store import assistants, audit, events, runs, threads

MAX_TRIES = 5
"""Times a run with ``multitask_strategy`` interrupt or rollback cancels what was queued while
it was cancelling, before it gives up (409)."""


class _CancelFirst(Exception):
    """Active runs no cancel was requested for: cancel them, then queue again."""


@dataclass
class _Request:
    """One request to create a run, across its tries."""

    thread_id: str
    body: RunCreate
    threadless: bool
    target: RunAssistant
    """What ``body.assistant_id`` names; loaded (its config read) once a try read it."""
    read_first: bool
    """Check the run on a read of its own before the transaction (a resume, a fork, a run
    that cancels others, or a check that found it needs more than the thread)."""
    stopped: list[str] = field(default_factory=list)
    """Runs this request cancelled (``multitask_strategy`` interrupt or rollback)."""


async def create_run(
    svc: Core,
    thread_id: str,
    body: RunCreate,
    *,
    threadless: bool = False,
    assistant: RunAssistant | None = None,
) -> dict[str, Any]:
    """Validate, then queue the run in one transaction with the check for active runs.

    ``assistant``: what ``body.assistant_id`` names (``api.runs.assistant_access.for_run``), if the
    caller resolved it already. A graph's default assistant is read in the transaction's first
    round trip, with the thread.

    A resume records each answered interrupt in ``approvals`` in that transaction: a second
    answer to the same interrupt, concurrent or later, gets 409 and queues nothing. The run
    and its decisions are the caller's: the audit log names them, the graph sees them as
    ``langgraph_auth_user``.

    A try that finds it must read first starts again that way, having written nothing; one that
    finds runs queued while it cancelled (a racing interrupt or rollback) cancels them too,
    outside the thread's lock (a worker finishing a run locks the run, then the thread), and
    tries again, ``MAX_TRIES`` times at most.
    """
    target = assistant or await assistant_access.for_run(svc, body.assistant_id)
    request = _Request(thread_id, body, threadless, target, read_first=reads_first(body))
    tries = 0
    while True:
        try:
            return await _try(svc, request)
        except ReadFirst:
            request.read_first = True
        except _CancelFirst:
            if tries >= MAX_TRIES:
                raise Conflict(
                    f"Runs kept being queued on thread {thread_id!r} while this one cancelled "
                    "them; send it again."
                ) from None
            tries += 1


async def _try(svc: Core, request: _Request) -> dict[str, Any]:
    """One try: check, then the transaction. Raises :class:`ReadFirst` or
    :class:`_CancelFirst` (nothing written) to be tried again."""
    thread_id, body, threadless = request.thread_id, request.body, request.threadless
    target = request.target
    user, actor = caller(), svc.actor()
    checked: Checked | None = None
    if request.read_first:
        target = request.target = await assistant_access.load(svc, target)
        found = await visible_for_run(svc, thread_id, body)
        checked = await check_request(
            svc, thread_id, body, found, assistant=target, threadless=threadless
        )
    stopped = request.stopped
    if checked and checked.thread and body.multitask_strategy in ("interrupt", "rollback"):
        async with svc.pool.connection() as conn:
            for run_id in await runs.active_ids(conn, thread_id, uncancelled=True):
                if cancelled := await _cancel(conn, run_id):
                    stopped.append(cancelled)
    reserved: tuple[str, float] | None = None
    try:
        async with svc.pool.connection() as conn:
            # Pipelined: BEGIN goes with the lock (and the thread's read), and the inserts (the
            # thread's, if it creates one, and the run's) with the COMMIT (the run's row is read
            # after it): two round trips, and one more for each approval a run closes.
            async with pipelined_transaction(conn):
                if checked is None:
                    # A graph's default assistant: read with the thread, in the same round trip.
                    default = None
                    if not target.loaded:
                        key = uuid.UUID(target.assistant_id)
                        default = await assistants.send_get(conn, key)
                    found, active = await runs.lock_and_read_thread(conn, thread_id)
                    if default is not None:
                        target = assistant_access.loaded(target, await default.fetchone())
                        request.target = target
                    if found is not None:
                        await check_visible(svc, thread_id, body, found)
                    checked = await check_request(
                        svc,
                        thread_id,
                        body,
                        found,
                        assistant=target,
                        threadless=threadless,
                        in_transaction=True,
                    )
                else:
                    active = await runs.lock_thread(conn, thread_id)
                kwargs = checked.kwargs
                if active is None:
                    if checked.thread is not None or body.if_not_exists != "create":
                        raise NotFound(
                            f"No thread {thread_id!r}. Create it with POST /threads, or send "
                            '"if_not_exists": "create".'
                        )
                    value: dict[str, Any] = {"thread_id": thread_id, "metadata": {}}
                    await svc.scope("create", value)
                    owner = svc.access.owner_of_new(user)
                    # Not read: it goes out with the insert and the COMMIT (``is_taken`` below).
                    await threads.send_create(conn, thread_id, value["metadata"], owner)
                    active = []
                # Nothing else active on the thread (its lock is held): this process starts the run
                # itself when it has a free slot, without a claim, a notification or a queue.
                idle = not active
                if checked.answers:
                    # Before the active-run check: a concurrent second answer would otherwise be
                    # told to wait for (or enqueue behind) the run its twin just started.
                    await _refuse_answered(conn, thread_id, list(checked.answers))
                if body.multitask_strategy in ("interrupt", "rollback"):
                    # Cancelled (above, through the usual machinery) before this transaction; the
                    # claim starts the new run only once they stopped (one run per thread, oldest
                    # first). A rollback's new run removes them and their checkpoints when it
                    # starts (``api.engine.rollback``).
                    if await runs.active_ids(conn, thread_id, uncancelled=True):
                        raise _CancelFirst
                    gone = list(dict.fromkeys(stopped + [a["run_id"] for a in active]))
                    # What a cancelled rollback was to remove, this run removes.
                    undo = await runs.rollbacks_of(conn, gone) if gone else []
                    if body.multitask_strategy == "rollback":
                        undo = gone + undo
                    if undo:
                        kwargs["rollback"] = list(dict.fromkeys(undo))
                    active = []
                if active and body.multitask_strategy == "reject":
                    raise Conflict(
                        f"Thread {thread_id!r} already has an active run ({active[0]['run_id']}, "
                        f"{active[0]['status']}). Wait for it "
                        f"(GET .../runs/{active[0]['run_id']}/join), "
                        'cancel it, or send "multitask_strategy": "enqueue".'
                    )
                if idle and svc.workers is not None:
                    reserved = await svc.workers.reserve()
                inserted = await runs.send_insert(
                    conn,
                    thread_id=thread_id,
                    assistant_id=target.assistant_id,
                    graph_id=target.graph_id,
                    kwargs=kwargs,
                    metadata=body.metadata,
                    multitask_strategy=body.multitask_strategy,
                    start=reserved,
                )
                for interrupt_id, closing in checked.superseded.items():
                    # A new message closes the pending approvals as rejected; the agent gives the
                    # model a tool message for each. Already answered (a racing resume): kept.
                    await audit.record_decision(
                        conn,
                        thread_id,
                        interrupt_id,
                        closing,
                        inserted.run_id,
                        actor,
                        door(),
                    )
                for interrupt_id, answer in checked.answers.items():
                    if not await audit.record_decision(
                        conn, thread_id, interrupt_id, answer, inserted.run_id, actor, door()
                    ):
                        raise Conflict(
                            f"Interrupt {interrupt_id} was already answered; a decision is applied "
                            f"once. GET /threads/{thread_id}/state shows what is pending now."
                        )
            run = await inserted.row()
    except BaseException as err:
        if reserved is not None and svc.workers is not None:
            # Not committed, or not known to be (cancelled in the COMMIT): a committed run keeps
            # a lease nobody renews, and another claim takes it when that expires (attempt 2).
            svc.workers.unreserve()
        if threads.is_taken(err):
            raise Conflict(f"Thread {thread_id!r} was created meanwhile; try again.") from None
        raise
    if reserved is not None and svc.workers is not None:
        assert inserted.claimed is not None  # committed as claimed: ``start=reserved``
        svc.workers.start_reserved(inserted.claimed)
        # Answered as queued, as LangGraph Server answers a new run (clients expect "pending");
        # GET shows it running, as it would be there a moment later too.
        return {**run, "status": "pending", "attempt": 0}
    # Wake this process's claim loop now rather than when the notification comes back.
    svc.hub.runs_changed.set()
    return run


async def _cancel(conn: Any, run_id: str) -> str | None:
    """Cancel one active run as ``POST .../cancel`` does (its id, or None if it ended)."""
    async with conn.transaction():
        cancelled = await runs.request_cancel(conn, run_id)
        if cancelled is None:
            return None
        if cancelled["status"] == "interrupted":  # never claimed: no worker ends its stream
            end = end_event(run_id, "interrupted", cancelled["error"])
            await events.append_unfenced(
                conn, run_id, "end", orjson.dumps(end).decode(), cancelled["attempt"]
            )
    return str(cancelled["run_id"])


async def _refuse_answered(conn: Any, thread_id: str, interrupt_ids: list[str]) -> None:
    done = await audit.answered(conn, thread_id, interrupt_ids)
    if done:
        raise Conflict(
            f"Interrupt(s) {done} were already answered; a decision is applied once. "
            f"GET /threads/{thread_id}/state shows what is pending now."
        )
