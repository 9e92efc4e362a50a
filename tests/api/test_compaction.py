"""Keeping only a thread's latest checkpoint (``api.durable.compaction``): after each run with
``THREADLINE_CHECKPOINT_RETENTION=latest``, and on request with ``POST /threads/prune``.

The agent's ``messages`` is a ``DeltaChannel``, stored as deltas replayed from the ancestors:
compaction must snapshot it first, or the kept checkpoint would load with no messages.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph_sdk.errors import ConflictError, NotFoundError

from agent import ApprovalPolicy, Limits
from api.durable.compaction import compact_thread
from api.engine.runtime import Runtime
from tests.utils.graphs import scripted_graph
from tests.utils.scripted_model import ScriptedChatModel, call
from tests.utils.server import ServerProcess
from tests.utils.tasks import counter, greet

SERVER_ENV = {"THREADLINE_CHECKPOINT_RETENTION": "latest"}
WAIT = 60.0
AUTO = ApprovalPolicy({"*": "auto"})
LIMITS = Limits(max_steps=100, max_verify_attempts=1)
"""The in-process graphs: every call runs unasked, one verification."""


def checkpoint_rows(database_url: str, thread_id: str) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        return {
            table: conn.execute(
                f"SELECT count(*) FROM {table} WHERE thread_id = %s", (thread_id,)
            ).fetchone()[0]  # type: ignore[index]
            for table in ("checkpoints", "checkpoint_writes")
        }


async def run_to_end(client: Any, thread_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    run = await client.runs.create(thread_id, "agent", input=payload, if_not_exists="create")
    await asyncio.wait_for(client.runs.join(thread_id, run["run_id"]), WAIT)
    finished: dict[str, Any] = await client.runs.get(thread_id, run["run_id"])
    return finished


async def test_each_finished_run_leaves_one_checkpoint_and_the_whole_state(
    client: Any, server: ServerProcess, module_database_url: str
) -> None:
    tid = str(uuid.uuid4())
    first = await run_to_end(client, tid, counter(3))
    assert first["status"] == "success"
    state = await client.threads.get_state(tid)
    assert state["values"]["status"] == "verified"
    messages = state["values"]["messages"]
    # The task; a step with one call and one with two (its result each); the final answer.
    assert len(messages) == 7
    assert checkpoint_rows(module_database_url, tid) == {"checkpoints": 1, "checkpoint_writes": 0}
    history = await client.threads.get_history(tid, limit=50)
    assert len(history) == 1 and history[0]["values"] == state["values"]

    # The next run starts from the kept checkpoint, with every message the first one left.
    second = await run_to_end(client, tid, counter(2))
    assert second["status"] == "success"
    after = await client.threads.get_state(tid)
    assert after["values"]["status"] == "verified"
    assert after["values"]["messages"][: len(messages)] == messages
    assert len(after["values"]["messages"]) > len(messages)
    assert checkpoint_rows(module_database_url, tid)["checkpoints"] == 1


async def test_an_interrupted_run_keeps_its_history_and_prune_keeps_it_resumable(
    client: Any, server: ServerProcess, module_database_url: str
) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "agent", input=greet("Ada"))
    await asyncio.wait_for(client.runs.join(tid, run["run_id"]), WAIT)
    assert (await client.threads.get(tid))["status"] == "interrupted"
    # Not compacted after the run: it did not end in success.
    assert checkpoint_rows(module_database_url, tid)["checkpoints"] > 1
    before = await client.threads.get_state(tid)
    [pending] = before["interrupts"]

    assert await client.threads.prune([tid], strategy="keep_latest") == {"pruned_count": 1}
    assert checkpoint_rows(module_database_url, tid)["checkpoints"] == 1
    kept = await client.threads.get_state(tid)
    assert kept["values"] == before["values"] and kept["next"] == before["next"]
    assert [i["id"] for i in kept["interrupts"]] == [pending["id"]]

    resumed = await client.runs.create(
        tid, "agent", command={"resume": {pending["id"]: {"decisions": [{"type": "approve"}]}}}
    )
    await asyncio.wait_for(client.runs.join(tid, resumed["run_id"]), WAIT)
    done = await client.threads.get_state(tid)
    assert done["values"]["status"] == "verified"
    assert (
        done["values"]["messages"][: len(before["values"]["messages"])]
        == (before["values"]["messages"])
    )


async def test_prune_refuses_a_busy_thread_skips_unknown_ones_and_deletes(
    client: Any, server: ServerProcess
) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "agent", input=counter(3, delay=0.4))
    with pytest.raises(ConflictError) as refused:
        await client.threads.prune([tid, str(uuid.uuid4())], strategy="keep_latest")
    assert "active run" in str(refused.value)
    await asyncio.wait_for(client.runs.join(tid, run["run_id"]), WAIT)

    assert await client.threads.prune([str(uuid.uuid4())]) == {"pruned_count": 0}
    assert await client.threads.prune([tid, tid]) == {"pruned_count": 1}
    with pytest.raises(NotFoundError):
        await client.threads.get(tid)


async def test_prune_rejects_an_unknown_strategy_with_a_message(server: ServerProcess) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=server.url) as http:
        res = await http.post("/threads/prune", json={"thread_ids": ["x"], "strategy": "all"})
        empty = await http.post("/threads/prune", json={"thread_ids": []})
    assert res.status_code == 422 and "keep_latest" in res.text
    assert empty.status_code == 422


async def test_a_long_thread_compacts_to_its_snapshot_and_goes_on(runtime: Runtime) -> None:
    """In-process, 25 steps: the kept checkpoint loads the same values (the snapshot is what
    makes that true: without it ``messages`` would come back empty), storage shrinks, and the
    thread continues and compacts again."""
    steps = 25
    paths = [".", "./", "./."]  # varied, so the stuck guard never fires
    replies: list[Any] = [call("list_files", path=paths[i % 3]) for i in range(steps)]
    replies += [AIMessage("first part done"), call("list_files", path="."), AIMessage("done")]
    graph = scripted_graph(runtime, ScriptedChatModel(replies=replies), policy=AUTO, limits=LIMITS)
    thread_id = str(uuid.uuid4())
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 300}
    await graph.ainvoke({"messages": [HumanMessage("go")]}, config, durability="sync")
    before = await graph.aget_state(config)
    rows_before = checkpoint_rows(runtime.settings.database_url or "", thread_id)
    assert rows_before["checkpoints"] > 2 * steps

    done = await compact_thread(runtime.pool, runtime.saver, graph, thread_id)
    assert done.deleted_checkpoints == rows_before["checkpoints"] - 1
    after = await graph.aget_state(config)
    assert len(after.values["messages"]) == len(before.values["messages"]) == 2 * steps + 2
    assert after.values == before.values and after.next == before.next
    history = [s async for s in graph.aget_state_history(config)]
    assert len(history) == 1 and history[0].values == before.values
    assert checkpoint_rows(runtime.settings.database_url or "", thread_id) == {
        "checkpoints": 1,
        "checkpoint_writes": 0,
    }

    await graph.ainvoke({"messages": [HumanMessage("more")]}, config, durability="sync")
    more = await graph.aget_state(config)
    assert more.values["messages"][: len(before.values["messages"])] == before.values["messages"]
    assert [m.content for m in more.values["messages"]][-1] == "done"
    again = await compact_thread(runtime.pool, runtime.saver, graph, thread_id)
    assert again.kept is not None and again.deleted_checkpoints > 0
    assert (await graph.aget_state(config)).values == more.values


class MovesOnWhileRead:
    """The graph, except that another run lands on the thread while its state is read (a
    wrapper: the graph itself is left as LangGraph made it)."""

    def __init__(self, graph: Any, config: RunnableConfig) -> None:
        self.graph = graph
        self.config = config

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)

    async def aget_state(self, *args: Any, **kwargs: Any) -> Any:
        state = await self.graph.aget_state(*args, **kwargs)
        await self.graph.ainvoke(
            {"messages": [HumanMessage("more")]}, self.config, durability="sync"
        )
        return state


async def test_compaction_deletes_nothing_when_the_thread_moved_on_meanwhile(
    runtime: Runtime,
) -> None:
    replies: list[Any] = [call("list_files", path="."), AIMessage("one"), AIMessage("two")]
    graph = scripted_graph(runtime, ScriptedChatModel(replies=replies), policy=AUTO, limits=LIMITS)
    thread_id = str(uuid.uuid4())
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 50}
    await graph.ainvoke({"messages": [HumanMessage("go")]}, config, durability="sync")
    rows = checkpoint_rows(runtime.settings.database_url or "", thread_id)
    moving = MovesOnWhileRead(graph, config)
    done = await compact_thread(runtime.pool, runtime.saver, cast(Any, moving), thread_id)
    assert done.kept is None and done.skipped == "the thread moved on while it was read"
    after = checkpoint_rows(runtime.settings.database_url or "", thread_id)
    assert after["checkpoints"] > rows["checkpoints"]  # the second run's, and nothing deleted
    texts = [m.content for m in (await graph.aget_state(config)).values["messages"]]
    assert texts[0] == "go" and texts[-1] == "two"


async def test_prune_does_not_compact_under_a_queued_run(runtime: Runtime) -> None:
    from api.contract.runs import RunCreate
    from api.durable.compaction import ThreadBusy
    from api.lifecycle import open_service

    graph = runtime.graphs["agent"]
    async with open_service(runtime.settings, runtime=runtime, workers=False) as svc:
        thread_id = str(uuid.uuid4())
        # Two checkpoints to compact, then a run queued (no worker here: it stays pending).
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        await graph.aupdate_state(config, {"messages": [HumanMessage("a")]}, as_node="verify")
        await graph.aupdate_state(config, {"messages": [HumanMessage("b")]}, as_node="verify")
        await svc.create_run(
            thread_id,
            RunCreate(assistant_id="agent", input=counter(1), if_not_exists="create"),
        )
        with pytest.raises(ThreadBusy):
            await compact_thread(runtime.pool, runtime.saver, graph, thread_id, check_idle=True)
        assert checkpoint_rows(runtime.settings.database_url or "", thread_id)["checkpoints"] == 2
