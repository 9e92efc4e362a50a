"""One episode: a suite case played once on a new thread, driven over HTTP as a user would.

With the official ``langgraph_sdk`` client: create the thread, start the run, read its stream to
the end (reconnecting with ``Last-Event-ID`` after any drop, :mod:`eval.streams`), answer every
pending approval with the runner's decision (one decision for each call an approval asks about:
the built-in agent asks about all of a step's parallel calls in one interrupt; every pending
interrupt in one resume), repeat until no approval is pending; then read the final state, the
audit log and, for ``counter``, the file.

Every call survives a server that is being killed and restarted: reads are retried; a run is
created at most once per step (each carries an ``eval_key`` in its metadata, and a retry first
looks for a run with that key).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, InternalServerError
from langgraph_sdk.schema import StreamMode

from eval.streams import RunTrace, TimedFollower
from eval.suite import Case
from tests.utils.server import ServerProcess, api_headers

T = TypeVar("T")
MODES: list[StreamMode] = ["updates", "custom"]
TRANSIENT = (httpx.TransportError, InternalServerError)
"""What a server being killed or restarting looks like to a client: retry."""
MAX_ROUNDS = 20
"""Runs per episode (the first and one per approval round): a bound, not an expectation."""
MAX_USER_RESUMES = 3
"""Times the runner resumes a run that ran out of attempts (each one died with its server)."""
RETRY_SECONDS = 120.0


async def retry(call: Callable[[], Awaitable[T]], seconds: float = RETRY_SECONDS) -> T:
    """``await call()``, again after transient failures, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()
        except TRANSIENT:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def count_tool_calls(messages: Sequence[Any]) -> int:
    return sum(
        len(m.get("tool_calls") or [])
        for m in messages
        if isinstance(m, dict) and m.get("type") == "ai"
    )


def repeated_file_effects(tool_rows: Sequence[dict[str, Any]]) -> int:
    """File changes applied more than once by one tool call, from its audit rows.

    An ``edit_file`` or appending ``write_file`` call that succeeded twice changed the workspace
    twice. Other repeats change nothing twice: a read, a whole-file write of the same content, an
    edit whose second run found its text gone (it fails). ``run_command`` is opaque here: the
    ``counter`` task measures its commands' effects directly (duplicated lines).
    """
    succeeded: Counter[str] = Counter()
    for row in tool_rows:
        detail = row.get("detail") or {}
        args = detail.get("args") or {}
        mutates = row["tool"] == "edit_file" or (
            row["tool"] == "write_file" and bool(args.get("append"))
        )
        if mutates and detail.get("ok"):
            succeeded[row["idempotency_key"]] += 1
    return sum(n - 1 for n in succeeded.values())


def asked_calls(value: Any) -> int:
    """How many calls an approval request asks about (its action requests); 1 for an interrupt
    of another shape."""
    requests = value.get("action_requests") if isinstance(value, dict) else None
    return len(requests) if isinstance(requests, list) and requests else 1


def approval_answer(decision: str, count: int = 1) -> dict[str, Any]:
    """The runner's answer to an approval request of ``count`` calls (LangChain's
    human-in-the-loop format): the same decision for each, in their order."""
    if decision == "reject":
        one = {"type": "reject", "message": "rejected by the evaluation runner"}
    else:
        one = {"type": decision}
    return {"decisions": [dict(one) for _ in range(count)]}


@dataclass
class Driver:
    """Plays episodes against one service."""

    client: LangGraphClient
    targets: Sequence[ServerProcess | str]
    """Where streams reconnect: the server(s) the runner owns, or the URL it was given."""
    base_url: str
    clock: Callable[[], float]
    decision: str = "approve"
    timeout: float = 300.0

    async def play(self, case: Case, rep: int) -> dict[str, Any]:
        """Run ``case`` once; never raises for what the service did (see ``error``)."""
        thread_id = str(uuid.uuid4())
        out: dict[str, Any] = {
            "task": case.task,
            "kind": case.kind,
            "rep": rep,
            "thread_id": thread_id,
            "passed": False,
            "status": None,
            "approvals": 0,
            "user_resumes": 0,
            "runs": [],
            "error": None,
        }
        started = self.clock()
        traces: list[RunTrace] = []
        try:
            async with asyncio.timeout(self.timeout):
                await self._play(case, rep, thread_id, out, traces)
                await self._measure(case, thread_id, out)
        except TimeoutError:
            out["error"] = f"TimeoutError: the episode did not finish within {self.timeout:g} s"
        except Exception as err:  # an episode's failure is a result, not a crash of the runner
            out["error"] = f"{type(err).__name__}: {err}"[:500]
        ends = [t.ended_at for t in traces if t.ended_at is not None]
        out["started_at"] = round(started, 4)
        out["wall_seconds"] = round((max(ends) if ends else self.clock()) - started, 4)
        out["runs"] = [t.to_json() for t in traces]
        out["lost_events"] = sum(t.lost_events for t in traces)
        out["duplicate_events"] = sum(t.duplicate_events for t in traces)
        out["streams_contiguous"] = all(t.contiguous for t in traces) and bool(traces)
        return out

    async def _play(
        self, case: Case, rep: int, thread_id: str, out: dict[str, Any], traces: list[RunTrace]
    ) -> None:
        await retry(
            lambda: self.client.threads.create(
                thread_id=thread_id,
                metadata={"eval_task": case.task, "eval_rep": rep},
                if_exists="do_nothing",
            )
        )
        body: dict[str, Any] = {"input": case.input()}
        for round_ in range(MAX_ROUNDS):
            run, created_at = await self._start_run(thread_id, f"round-{round_}", body)
            trace = await self._follow(thread_id, run["run_id"], created_at, traces)
            if trace.status == "error":
                # A run that died with its server too often fails; a user resumes the thread
                # (input null continues from the last checkpoint), as the web page offers.
                if trace.error != "AttemptsExhausted" or out["user_resumes"] >= MAX_USER_RESUMES:
                    return
                out["user_resumes"] += 1
                body = {"input": None}
                continue
            state = await retry(lambda: self.client.threads.get_state(thread_id))
            pending = state.get("interrupts") or []
            if not pending:
                return
            counts = {i["id"]: asked_calls(i.get("value")) for i in pending}
            out["approvals"] += sum(counts.values())  # asks answered: one per asked call
            answers = {iid: approval_answer(self.decision, n) for iid, n in counts.items()}
            body = {"command": {"resume": answers}}
        raise RuntimeError(f"still asking for approvals after {MAX_ROUNDS} runs")

    async def _start_run(
        self, thread_id: str, key: str, body: dict[str, Any]
    ) -> tuple[dict[str, Any], float]:
        """Create the step's run once, even when the server dies around the request."""
        conflicts = 0
        deadline = time.monotonic() + RETRY_SECONDS
        while True:
            try:
                run = await self.client.runs.create(
                    thread_id,
                    "agent",
                    stream_mode=MODES,
                    metadata={"eval_key": key},
                    **body,
                )
                return dict(run), self.clock()
            except (*TRANSIENT, ConflictError) as err:
                # The request may have been applied before the connection died.
                found = await retry(lambda: self._find_run(thread_id, key))
                if found is not None:
                    return found, self.clock()
                conflicts += isinstance(err, ConflictError)
                if conflicts >= 3 or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def _find_run(self, thread_id: str, key: str) -> dict[str, Any] | None:
        runs = await self.client.runs.list(thread_id, limit=100)
        return next(
            (dict(r) for r in runs if (r.get("metadata") or {}).get("eval_key") == key), None
        )

    async def _follow(
        self, thread_id: str, run_id: str, created_at: float, traces: list[RunTrace]
    ) -> RunTrace:
        """Read the run's stream to its end; the trace is kept even when that fails."""
        follower = TimedFollower(thread_id, run_id, clock=self.clock)
        try:
            await follower.follow(self.targets, timeout=self.timeout)
        finally:
            traces.append(RunTrace.from_follower(follower, created_at))
        return traces[-1]

    async def _measure(self, case: Case, thread_id: str, out: dict[str, Any]) -> None:
        state = await retry(lambda: self.client.threads.get_state(thread_id))
        raw = state.get("values")
        values: dict[str, Any] = raw if isinstance(raw, dict) else {}
        usage = values.get("usage") or {}
        out.update(
            status=values.get("status"),
            passed=values.get("status") == "verified",
            verify_attempts=values.get("verify_attempts", 0),
            steps=usage.get("steps", 0),
            tokens=usage.get("tokens", 0),
            tool_calls=count_tool_calls(values.get("messages") or []),
            verdict=((values.get("verdict") or {}).get("output") or "")[-300:],
        )
        audit = await retry(
            lambda: self.client.http.get(f"/threads/{thread_id}/audit", params={"limit": 5000})
        )
        tool_rows = [r for r in audit if r["kind"] == "tool"]
        executions = Counter(r["idempotency_key"] for r in tool_rows)
        out["tool_executions"] = sum(executions.values())
        out["reexecuted_calls"] = sum(n - 1 for n in executions.values() if n > 1)
        out["reexecuted"] = [
            {
                "tool": r["tool"],
                "tool_call_id": r["tool_call_id"],
                "attempt": r["attempt"],
                "ok": (r.get("detail") or {}).get("ok"),
            }
            for r in tool_rows
            if executions[r["idempotency_key"]] > 1
        ]
        out["duplicate_effects"] = repeated_file_effects(tool_rows)
        if case.task == "counter":
            lines = await retry(lambda: self._workspace_lines(thread_id, "counter.txt"))
            out["duplicate_effects"] += len(lines) - len(set(lines))

    async def _workspace_lines(self, thread_id: str, path: str) -> list[str]:
        async with httpx.AsyncClient(
            base_url=self.base_url, timeout=30.0, headers=api_headers()
        ) as http:
            response = await http.get(f"/threads/{thread_id}/workspace/{path}")
            if response.status_code == 404:
                return []
            response.raise_for_status()
            return [line.strip() for line in response.text.splitlines() if line.strip()]
