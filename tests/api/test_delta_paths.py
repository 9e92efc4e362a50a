"""Every way a thread is read or rewritten, for a graph whose ``messages`` is a LangGraph
``DeltaChannel``: the same as for the same graph with the stock ``add_messages`` channel.

A ``DeltaChannel`` stores a checkpoint's new messages only (a whole snapshot every few updates),
and LangGraph rebuilds its value from the ancestors' writes back to the last snapshot
(``BaseCheckpointSaver.aget_delta_channel_history``). Whatever threadline stores, copies,
deletes or compacts itself (``api.store.checkpoint_tables``, ``api.durable.task_writes``,
``api.durable.compaction``) must leave that chain whole. So one project serves two graphs of one
logic, ``stock`` and ``delta`` (snapshot every 3 updates: a short thread has both snapshots and
replays), with a subgraph of its own delta ``messages``, an ``interrupt()`` in the parent and in
the subgraph, parallel writers, a ``RemoveMessage`` and an ``Overwrite``. Every node's message
says how many messages it read and the last one, so a wrong rebuild shows in all that follows.

The same requests are sent to a thread of each graph through the HTTP API; what comes back is
compared after ids and timestamps are replaced by labels in order of appearance
(:class:`Labels`): the delta graph's answers must equal the stock graph's, path by path. The
messages after each turn must also be those LangGraph's own in-memory checkpointer gives
(:func:`in_memory`), so that both graphs cannot be wrong alike.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.api.conftest import FAST
from tests.utils.db import create_database, drop_database
from tests.utils.server import ServerProcess, serving

GRAPHS_PY = textwrap.dedent(
    '''
    """Two graphs of one logic: ``stock`` keeps ``messages`` with ``add_messages``, ``delta`` as
    a ``DeltaChannel`` snapshotted every 3 updates. Each message a node writes says what the node
    read (the number of messages and the last one)."""

    import asyncio
    import operator
    from pathlib import Path
    from typing import Annotated, Any, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage
    from langgraph.channels import DeltaChannel
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.types import Overwrite, interrupt

    from agent.state import add_messages_batch

    HERE = Path(__file__).parent


    class StockSub(TypedDict, total=False):
        messages: Annotated[list[AnyMessage], add_messages]
        mode: str


    class StockState(StockSub, total=False):
        turn: int
        log: Annotated[list[str], operator.add]


    class DeltaSub(TypedDict, total=False):
        messages: Annotated[
            list[AnyMessage], DeltaChannel(add_messages_batch, snapshot_frequency=3)
        ]
        mode: str


    class DeltaState(DeltaSub, total=False):
        turn: int
        log: Annotated[list[str], operator.add]


    def seen(state: Any) -> str:
        messages = state.get("messages") or []
        last = messages[-1].content if messages else "-"
        return f"{len(messages)}|{last}"


    def build(state_schema: Any, sub_schema: Any) -> Any:
        def draft(state: Any) -> Any:
            return {"messages": [AIMessage(f"draft {seen(state)}")]}

        def review(state: Any) -> Any:
            answer = "auto"
            if state.get("mode") == "sub-ask":
                answer = interrupt({"question": "ok?", "seen": seen(state)})
            return {"messages": [AIMessage(f"review {answer} {seen(state)}")]}

        def polish(state: Any) -> Any:
            n = len(state["messages"])
            return {"messages": [AIMessage(f"polish {seen(state)}", id=f"polish-{n}")]}

        sub = StateGraph(sub_schema)
        sub.add_node("draft", draft)
        sub.add_node("review", review)
        sub.add_node("polish", polish)
        sub.add_edge(START, "draft")
        sub.add_edge("draft", "review")
        sub.add_edge("review", "polish")
        sub.add_edge("polish", END)

        async def think(state: Any) -> Any:
            t = state.get("turn", 0)
            while state.get("mode") == "hold" and not (HERE / f"release-{t}").exists():
                await asyncio.sleep(0.05)  # held until the test releases it (or cancels the run)
            return {
                "messages": [
                    AIMessage(f"think {seen(state)}"),
                    AIMessage(f"plan {t}", id=f"think-t{t}"),
                ],
                "log": [f"think {t}"],
            }

        def left(state: Any) -> Any:
            t = state.get("turn", 0)
            wrote = AIMessage(f"left {seen(state)}", id=f"left-t{t}")
            if state.get("mode") == "ask-right":  # its sibling pauses: this stays pending
                return {"messages": [wrote, RemoveMessage(id=f"think-t{t}")]}
            return {"messages": [wrote]}

        def right(state: Any) -> Any:
            answer = "-"
            if state.get("mode") == "ask-right":  # while ``left``, beside it, has finished
                answer = interrupt({"question": "right?", "seen": seen(state)})
            return {"messages": [AIMessage(f"right {answer} {seen(state)}")], "log": ["right"]}

        def join(state: Any) -> Any:
            return {"messages": [AIMessage(f"join {seen(state)}")]}

        def ask(state: Any) -> Any:
            answer = interrupt({"question": "go on?", "seen": seen(state)})
            return {"messages": [AIMessage(f"asked {answer} {seen(state)}")]}

        def edit(state: Any) -> Any:
            if state.get("mode") == "reset":
                return {"messages": Overwrite(list(state["messages"][-4:]))}
            return {
                "messages": [
                    RemoveMessage(id="think-t1"),
                    AIMessage("left of turn 2, edited", id="left-t2"),
                ]
            }

        def route(state: Any) -> str:
            mode = state.get("mode", "plain")
            if mode in ("sub", "sub-ask"):
                return "sub"
            if mode == "ask":
                return "ask"
            if mode in ("remove", "reset"):
                return "edit"
            return END

        graph = StateGraph(state_schema)
        graph.add_node("think", think)
        graph.add_node("left", left)
        graph.add_node("right", right)
        graph.add_node("join", join)
        graph.add_node("sub", sub.compile())
        graph.add_node("ask", ask)
        graph.add_node("edit", edit)
        graph.add_edge(START, "think")
        graph.add_edge("think", "left")
        graph.add_edge("think", "right")
        graph.add_edge(["left", "right"], "join")
        graph.add_conditional_edges("join", route, ["sub", "ask", "edit", END])
        graph.add_edge("sub", END)
        graph.add_edge("ask", END)
        graph.add_edge("edit", END)
        return graph.compile()


    stock = build(StockState, StockSub)
    delta = build(DeltaState, DeltaSub)
    '''
)
GRAPHS = ("stock", "delta")
SCRIPT = ["plain", "sub", "ask-right", "ask", "remove", "sub-ask", "reset", "plain"]
"""The main thread's turns: each adds a human message and runs 4 to 7 supersteps (two nodes in
parallel in one); ``ask-right``, ``ask`` and ``sub-ask`` pause (beside a finished node, in the
parent, in the subgraph) and are resumed."""
FLAT = ["plain", "ask", "remove", "ask-right", "reset", "plain"]
"""A thread that never enters the subgraph: compaction keeps only threads without subgraph
checkpoints (``api.durable.compaction``)."""
MIDDLE = (3, 11, 17, 30)
"""Positions in the main thread's history (newest first) used as checkpoints in the middle:
after an input, at a turn's end, in a turn's middle."""
SWEEP = {"THREADLINE_TTL_SWEEP_SECONDS": "0.2"}
WAIT = 60.0

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HASH = re.compile(r"\b[0-9a-f]{32}\b")
DROPPED = {"created_at", "updated_at", "ts", "run_attempt", "graph_id"}
"""Timestamps, the attempt, the graph's name."""
DELTA_ONLY = "counters_since_delta_snapshot"
"""Checkpoint metadata only a graph with a ``DeltaChannel`` has (its snapshot counters)."""


class Labels:
    """Ids (UUIDs: threads, runs, checkpoints, tasks, messages without one of their own; hashes:
    interrupts) replaced by ``#n``, numbered in order of first appearance over all of a graph's
    answers; timestamps and the delta channel's counters dropped. Two graphs that answered the
    same requests alike get the same labels; an id that changes between two reads of one graph
    gets a new one."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def label(self, match: re.Match[str]) -> str:
        return self.seen.setdefault(match.group(0), f"#{len(self.seen)}")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                self(k): written(self(v)) if k == "result" else self(v)
                for k, v in value.items()
                if k not in DROPPED and k != DELTA_ONLY
            }
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        if isinstance(value, str):
            return HASH.sub(self.label, UUID.sub(self.label, value))
        return value


def written(result: Any) -> Any:
    """A task's writes (``tasks[].result``) with each message as its type and content: LangGraph
    stores the writes to a ``DeltaChannel`` with ids given and dicts made messages
    (``ensure_message_ids``: they are replayed on every read), the stock channel's as sent."""
    if not isinstance(result, dict) or not isinstance(result.get("messages"), list):
        return result
    kinds = {"user": "human", "assistant": "ai"}
    messages = [
        {"type": m.get("type") or kinds.get(m.get("role"), m.get("role")), "content": m["content"]}
        if isinstance(m, dict)
        else m
        for m in result["messages"]
    ]
    return {**result, "messages": messages}


def turn_input(i: int, mode: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"turn {i}"}], "mode": mode, "turn": i}


def contents(state: Any) -> list[str]:
    return [m["content"] for m in (state.get("values") or {}).get("messages", [])]


class Api:
    """The HTTP API of one server for one graph; each answer kept under a name, as it came
    (``raw``) and normalised by the graph's :class:`Labels` (``seen``)."""

    def __init__(self, http: httpx.AsyncClient, graph: str) -> None:
        self.http = http
        self.graph = graph
        self.labels = Labels()
        self.seen: dict[str, Any] = {}
        self.raw: dict[str, Any] = {}
        self.threads: dict[str, str] = {}

    async def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """The answer's JSON; for an error, its status and message (a server error too: kept
        as an answer, to compare)."""
        try:
            response = await self.http.request(method, path, json=body, params=params or None)
        except httpx.TransportError as err:  # e.g. a wait whose run failed after it began
            return {"error": type(err).__name__}
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text
            return {"status": response.status_code, "detail": detail}
        return response.json() if response.content else None

    def put(self, name: str, answer: Any) -> Any:
        assert name not in self.raw, name
        self.raw[name] = answer
        self.seen[name] = self.labels(answer)
        return answer

    async def keep(self, name: str, method: str, path: str, body: Any = None, **params: Any) -> Any:
        return self.put(name, await self.call(method, path, body, **params))

    async def new_thread(self, name: str, **body: Any) -> str:
        thread = await self.keep(name, "POST", "/threads", body)
        self.threads[name] = thread["thread_id"]
        return str(thread["thread_id"])

    async def copy(self, name: str, thread_id: str) -> str:
        thread = await self.keep(name, "POST", f"/threads/{thread_id}/copy")
        self.threads[name] = thread["thread_id"]
        return str(thread["thread_id"])

    async def run(self, name: str, thread_id: str, **body: Any) -> Any:
        """A run to its end (``POST /threads/{id}/runs/wait``), then the thread's state."""
        body = {"assistant_id": self.graph, **body}
        await self.keep(name, "POST", f"/threads/{thread_id}/runs/wait", body)
        return await self.keep(f"{name}.state", "GET", f"/threads/{thread_id}/state")

    async def thread_values(self, name: str, thread_id: str) -> None:
        thread = await self.call("GET", f"/threads/{thread_id}")
        self.put(name, {k: thread.get(k) for k in ("status", "values", "interrupts")})

    async def history(self, name: str, thread_id: str, **body: Any) -> Any:
        return await self.keep(name, "POST", f"/threads/{thread_id}/history", body)

    async def started(self, name: str, thread_id: str, **body: Any) -> str:
        """A run started in the background, once it is running inside its first node."""
        body = {"assistant_id": self.graph, **body}
        run = await self.call("POST", f"/threads/{thread_id}/runs", body)
        assert "run_id" in run, run
        deadline = time.monotonic() + WAIT
        while (await self.call("GET", f"/threads/{thread_id}/runs/{run['run_id']}"))[
            "status"
        ] != "running":
            assert time.monotonic() < deadline, f"{name}: the run did not start"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # in ``think``, its input checkpoint stored
        return str(run["run_id"])


async def play(api: Api, thread_id: str, script: list[str], prefix: str, first: int = 1) -> None:
    """The turns of ``script`` on ``thread_id``: each a run to its end, the thread's state and
    values after it; a paused one is read (with its subgraph's state) and resumed."""
    for i, mode in enumerate(script, first):
        name = f"{prefix}{i}"
        state = await api.run(name, thread_id, input=turn_input(i, mode))
        await api.thread_values(f"{name}.thread", thread_id)
        if not state.get("next"):
            continue
        if mode == "sub-ask":
            await paused_in_subgraph(api, thread_id, name)
        await api.run(f"{name}.resume", thread_id, command={"resume": f"yes {i}"})
        await api.thread_values(f"{name}.resume.thread", thread_id)


async def paused_in_subgraph(api: Api, thread_id: str, name: str) -> None:
    """The state with ``subgraphs=true``, and the subgraph's own checkpoint and history."""
    nested = await api.keep(f"{name}.nested", "GET", f"/threads/{thread_id}/state", subgraphs=1)
    inner = nested["tasks"][0]["state"]["checkpoint"]
    await api.keep(
        f"{name}.inner",
        "POST",
        f"/threads/{thread_id}/state/checkpoint",
        {"checkpoint": inner, "subgraphs": True},
    )
    ns = {"checkpoint_ns": inner["checkpoint_ns"]}
    await api.history(f"{name}.inner_history", thread_id, limit=50, checkpoint=ns)


async def main_thread(api: Api) -> None:
    """The main thread, read every way, copied, forked and continued."""
    tid = await api.new_thread("main")
    await play(api, tid, SCRIPT, "turn")
    history = await api.history("history", tid, limit=500)
    await api.history("history.limit5", tid, limit=5)
    ids = [h["checkpoint"]["checkpoint_id"] for h in history]
    for pos in MIDDLE:
        await api.history(f"history.before{pos}", tid, limit=6, before=ids[pos])
        await api.keep(f"state_at{pos}", "GET", f"/threads/{tid}/state/{ids[pos]}")
        path = f"/threads/{tid}/state/{ids[pos]}"
        await api.keep(f"state_at{pos}.subgraphs", "GET", path, subgraphs=1)
    # Each checkpoint's state, read alone: as the history listed it.
    api.put("state_at_each", [await api.call("GET", f"/threads/{tid}/state/{i}") for i in ids])

    copy = await api.copy("copy", tid)
    await api.keep("copy.state", "GET", f"/threads/{copy}/state")
    await api.history("copy.history", copy, limit=500)
    await play(api, copy, ["plain", "sub"], "copy.turn", first=len(SCRIPT) + 1)

    # Forks: a state update at a checkpoint in the middle, continued; a run from one.
    fork = await api.copy("fork", tid)
    for pos in MIDDLE[:2]:
        update = {
            "values": {"messages": [{"role": "user", "content": f"forked {pos}"}]},
            "as_node": "think",
            "checkpoint_id": ids[pos],
        }
        await api.keep(f"fork{pos}.update", "POST", f"/threads/{fork}/state", update)
        await api.keep(f"fork{pos}.state", "GET", f"/threads/{fork}/state")
        await api.run(f"fork{pos}.continued", fork, input=None)
    for pos in MIDDLE:
        turn = turn_input(30 + pos, "sub")
        await api.run(f"fork.from{pos}", fork, input=turn, checkpoint_id=ids[pos])
        await api.history(f"fork.from{pos}.history", fork, limit=8)
    late = {"values": {"messages": [{"role": "user", "content": "late"}]}, "as_node": "join"}
    await api.keep("fork.latest.update", "POST", f"/threads/{fork}/state", late)
    await api.run("fork.latest.continued", fork, input=turn_input(50, "ask"))

    # keep_latest leaves a thread with subgraph checkpoints as it is.
    kept = await api.copy("prune.sub.copy", tid)
    prune = {"thread_ids": [kept], "strategy": "keep_latest"}
    await api.keep("prune.sub", "POST", "/threads/prune", prune)
    await api.keep("prune.sub.state", "GET", f"/threads/{kept}/state")
    await api.run("prune.sub.run", kept, input=turn_input(60, "sub-ask"))


async def flat_thread(api: Api) -> None:
    """A thread without subgraph checkpoints: pruned (both strategies), past its TTL."""
    tid = await api.new_thread("flat")
    await play(api, tid, FLAT, "flat")
    await api.history("flat.history", tid, limit=500)

    kept = await api.copy("prune.keep.copy", tid)
    prune = {"thread_ids": [kept], "strategy": "keep_latest"}
    await api.keep("prune.keep", "POST", "/threads/prune", prune)
    await api.keep("prune.keep.state", "GET", f"/threads/{kept}/state")
    await api.history("prune.keep.history", kept, limit=500)
    await play(api, kept, ["sub", "plain"], "prune.keep.turn", first=len(FLAT) + 1)

    gone = await api.copy("prune.delete.copy", tid)
    prune = {"thread_ids": [gone], "strategy": "delete"}
    await api.keep("prune.delete", "POST", "/threads/prune", prune)
    await api.keep("prune.delete.state", "GET", f"/threads/{gone}/state")
    await api.run("prune.delete.run", gone, input=turn_input(1, "plain"), if_not_exists="create")

    # Paused beside a finished node (its messages are the kept checkpoint's pending writes),
    # pruned, then answered.
    paused = await api.new_thread("paused")
    await play(api, paused, ["plain", "remove"], "paused")
    await api.run("paused.ask", paused, input=turn_input(3, "ask-right"))
    prune = {"thread_ids": [paused], "strategy": "keep_latest"}
    await api.keep("paused.prune", "POST", "/threads/prune", prune)
    await api.keep("paused.pruned", "GET", f"/threads/{paused}/state")
    await api.history("paused.pruned.history", paused, limit=500)
    await api.run("paused.resume", paused, command={"resume": "late yes"})

    # Past its TTL with keep_latest: its older checkpoints go, it and its state stay.
    expiring = await api.copy("ttl.copy", tid)
    ttl = {"metadata": {}, "ttl": {"strategy": "keep_latest", "ttl": 0.005}}
    await api.call("PATCH", f"/threads/{expiring}", ttl)
    deadline = time.monotonic() + 30
    while len(await api.call("POST", f"/threads/{expiring}/history", {"limit": 5})) > 1:
        assert time.monotonic() < deadline, "the thread past its TTL was not pruned"
        await asyncio.sleep(0.2)
    await api.keep("ttl.state", "GET", f"/threads/{expiring}/state")
    await api.history("ttl.history", expiring, limit=500)
    await play(api, expiring, ["plain", "ask-right"], "ttl.turn", first=len(FLAT) + 1)


async def other_writes(api: Api) -> None:
    """A thread started from supersteps; a run paused at a breakpoint; runs replaced by
    another (``multitask_strategy``: ``rollback`` deletes the replaced run's checkpoints,
    ``interrupt`` keeps them)."""
    updates = [
        [{"values": turn_input(0, "plain"), "as_node": "__input__"}],
        [{"values": {"messages": [{"role": "ai", "content": "thought"}]}, "as_node": "think"}],
        [
            {
                "values": {"messages": [{"role": "ai", "content": "l", "id": "l0"}]},
                "as_node": "left",
            },
            {"values": {"messages": [{"role": "ai", "content": "r"}]}, "as_node": "right"},
        ],
    ]
    body = {"metadata": {"graph_id": api.graph}, "supersteps": [{"updates": u} for u in updates]}
    tid = await api.new_thread("steps", **body)
    await api.keep("steps.state", "GET", f"/threads/{tid}/state")
    await api.history("steps.history", tid, limit=50)
    await api.run("steps.continued", tid, input=None)
    await play(api, tid, ["plain", "sub"], "steps.turn")

    await api.run("breakpoint", tid, input=turn_input(3, "ask"), interrupt_before=["join"])
    await api.run("breakpoint.continued", tid, input=None)
    await api.run("breakpoint.resumed", tid, command={"resume": "after the breakpoint"})

    for i, strategy in ((4, "rollback"), (6, "interrupt")):
        replaced = await api.started(f"{strategy}.held", tid, input=turn_input(i, "hold"))
        body = {"input": turn_input(i + 1, "plain"), "multitask_strategy": strategy}
        await api.run(strategy, tid, **body)
        run = await api.call("GET", f"/threads/{tid}/runs/{replaced}")
        api.put(f"{strategy}.replaced", {"status": run["status"]})
        await api.history(f"{strategy}.history", tid, limit=12)
    await play(api, tid, ["plain"], "after", first=8)


async def observe(url: str, scenario: Any) -> dict[str, Api]:
    """``scenario`` on each graph; one that stops on an answer it cannot go on from records
    why (``stopped``), and the answers it did not get are missing (:func:`differences`)."""
    apis = {}
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30.0, read=WAIT)) as http:
        for graph in GRAPHS:
            api = apis[graph] = Api(http, graph)
            try:
                await scenario(api)
            except (KeyError, IndexError, TypeError, AssertionError) as err:
                api.put("stopped", f"{type(err).__name__}: {err}")
    return apis


async def retained(api: Api) -> None:
    """``THREADLINE_CHECKPOINT_RETENTION=latest``: each run that ends without a pause leaves
    the thread compacted to its latest checkpoint."""
    tid = await api.new_thread("kept")
    for i, mode in enumerate(FLAT, 1):
        await play(api, tid, [mode], "kept", first=i)
        await api.history(f"kept{i}.history", tid, limit=500)
    await play(api, tid, ["sub", "plain"], "kept", first=len(FLAT) + 1)
    await api.history("kept.sub.history", tid, limit=500)


async def in_memory(project: Path, script: list[str]) -> dict[str, list[str]]:
    """The messages after each turn of ``script`` (and after its resume) of the ``stock`` graph
    run in this process with LangGraph's own in-memory checkpointer: what both graphs on
    threadline must give."""
    spec = importlib.util.spec_from_file_location("delta_paths_graphs", project / "graphs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph = module.stock.copy(update={"checkpointer": InMemorySaver()})
    config: Any = {"configurable": {"thread_id": "oracle"}}
    out = {}
    for i, mode in enumerate(script, 1):
        await graph.ainvoke(turn_input(i, mode), config)
        state = await graph.aget_state(config)
        out[f"{i}"] = [m.content for m in state.values["messages"]]
        if state.next:
            await graph.ainvoke(Command(resume=f"yes {i}"), config)
            state = await graph.aget_state(config)
            out[f"{i}.resume"] = [m.content for m in state.values["messages"]]
    return out


def write_project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "graphs.py").write_text(GRAPHS_PY)
    config = {"graphs": {g: f"./graphs.py:{g}" for g in GRAPHS}}
    (root / "langgraph.json").write_text(json.dumps(config))
    return root / "langgraph.json"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's ``langgraph.json``."""
    return write_project(tmp_path_factory.mktemp("delta") / "project")


@pytest.fixture(scope="module")
def expected(project: Path) -> dict[str, dict[str, list[str]]]:
    return {
        name: asyncio.run(in_memory(project.parent, script))
        for name, script in (("main", SCRIPT), ("flat", FLAT))
    }


@pytest.fixture(scope="module")
def delta_server(module_database_url: str, project: Path) -> Iterator[ServerProcess]:
    data = project.parent.parent / "data"
    proc = ServerProcess(module_database_url, data, config=project, env=SWEEP, name="delta", **FAST)
    with serving(proc):
        yield proc


@pytest.fixture(scope="module")
def main(delta_server: ServerProcess) -> dict[str, Api]:
    return asyncio.run(observe(delta_server.url, main_thread))


@pytest.fixture(scope="module")
def flat(delta_server: ServerProcess) -> dict[str, Api]:
    return asyncio.run(observe(delta_server.url, flat_thread))


@pytest.fixture(scope="module")
def others(delta_server: ServerProcess) -> dict[str, Api]:
    return asyncio.run(observe(delta_server.url, other_writes))


@pytest.fixture(scope="module")
def retention(pg_admin_url: str, project: Path) -> Iterator[dict[str, Api]]:
    url = create_database(pg_admin_url)
    env = {"THREADLINE_CHECKPOINT_RETENTION": "latest"}
    data = project.parent.parent / "retention"
    proc = ServerProcess(url, data, config=project, env=env, name="retention", **FAST)
    try:
        with serving(proc):
            yield asyncio.run(observe(proc.url, retained))
    finally:
        drop_database(pg_admin_url, url)


def differences(apis: dict[str, Api], *names: str) -> dict[str, Any]:
    """What the delta graph answered differently from the stock graph, of the answers named
    ``names`` or whose names start with one of them followed by a dot or a digit:
    name -> (stock's, delta's)."""
    stock, delta = apis["stock"].seen, apis["delta"].seen
    pattern = re.compile("|".join(rf"{re.escape(n)}($|[.\d])" for n in (*names, "stopped")))
    picked = [n for n in {**stock, **delta} if pattern.match(n)]
    assert picked, f"no answers named {names}"
    missing = "(no answer)"
    return {
        n: (stock.get(n, missing), delta.get(n, missing))
        for n in picked
        if stock.get(n, missing) != delta.get(n, missing)
    }


def checkpoint_kinds(database_url: str, thread_id: str) -> dict[tuple[bool, str], int]:
    """The thread's checkpoints by namespace (root or not) and how they hold ``messages``: a
    snapshot (``snapshot``: its blob at the checkpoint's version), only writes to replay
    (``replayed``), or not at all."""
    query = """
        SELECT c.checkpoint_ns = '' AS root,
               CASE WHEN NOT c.checkpoint -> 'channel_versions' ? 'messages' THEN 'none'
                    WHEN EXISTS (
                        SELECT 1 FROM checkpoint_blobs b
                        WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
                          AND b.channel = 'messages'
                          AND b.version = c.checkpoint -> 'channel_versions' ->> 'messages')
                    THEN 'snapshot' ELSE 'replayed' END AS kind,
               count(*) AS n
        FROM checkpoints c WHERE c.thread_id = %s GROUP BY 1, 2
    """
    with psycopg.connect(database_url) as conn:
        return {(root, kind): n for root, kind, n in conn.execute(query, (thread_id,))}


def test_the_delta_thread_is_stored_as_deltas(
    main: dict[str, Api], module_database_url: str
) -> None:
    """What the comparisons rest on: the delta graph's checkpoints, root and subgraph's, are
    mostly rebuilt from writes, some from a snapshot; the stock graph's all have the list."""
    delta = checkpoint_kinds(module_database_url, main["delta"].threads["main"])
    for root in (True, False):
        assert delta.get((root, "replayed"), 0) > delta.get((root, "snapshot"), 0) > 0, delta
    stock = checkpoint_kinds(module_database_url, main["stock"].threads["main"])
    assert stock.get((True, "replayed"), 0) == stock.get((False, "replayed"), 0) == 0, stock


def test_state_and_thread_values_after_each_turn(
    main: dict[str, Api], expected: dict[str, dict[str, list[str]]]
) -> None:
    assert differences(main, "main", "turn") == {}
    # Both as LangGraph's in-memory checkpointer has them.
    turns = {n: contents(main["delta"].raw[f"turn{n}.state"]) for n in expected["main"]}
    assert turns == expected["main"]
    assert main["delta"].raw["turn8.thread"]["values"] == main["delta"].raw["turn8.state"]["values"]


def seen_when_paused(answer: Any) -> str:
    """What the paused node had read (its interrupt's ``seen``), from a run's final values."""
    [pending] = answer["__interrupt__"]
    return str(pending["value"]["seen"])


def test_a_resumed_run_continues_with_the_right_messages(main: dict[str, Api]) -> None:
    """Each paused node, run again on resume, reads what it read when it paused: ``right``
    not the message its sibling ``left`` wrote in the same step (still a pending write then),
    the subgraph's ``review`` its ``draft``. ``left``'s writes are applied once."""
    raw = main["delta"].raw
    assert differences(main, "turn3", "turn4", "turn6") == {}
    resumed = contents(raw["turn3.resume.state"])
    assert f"right yes 3 {seen_when_paused(raw['turn3'])}" in resumed
    assert "left 18|plan 3" in resumed and "plan 3" not in resumed  # left removed it
    asked = contents(raw["turn4.resume.state"])
    assert asked[-1] == f"asked yes 4 {seen_when_paused(raw['turn4'])}"
    polished = contents(raw["turn6.resume.state"])
    assert polished[-2] == f"review yes 6 {seen_when_paused(raw['turn6'])}"


def test_history_with_limit_and_before_and_the_state_at_a_checkpoint(
    main: dict[str, Api],
) -> None:
    assert differences(main, "history", "state_at") == {}
    for api in main.values():
        history = api.raw["history"]
        assert len(history) > max(MIDDLE)
        assert api.raw["history.limit5"] == history[:5]
        for pos in MIDDLE:
            assert api.raw[f"history.before{pos}"] == history[pos + 1 : pos + 7]
            assert api.raw[f"state_at{pos}"]["values"] == history[pos]["values"]
        assert [s["values"] for s in api.raw["state_at_each"]] == [h["values"] for h in history]


def test_subgraph_state_while_paused_in_it(main: dict[str, Api]) -> None:
    assert differences(main, "turn6.nested", "turn6.inner", "turn6.inner_history") == {}
    raw = main["delta"].raw
    [task] = raw["turn6.nested"]["tasks"]
    inner = task["state"]
    assert inner["next"] == ["review"]
    assert contents(inner)[-1].startswith(f"draft {len(contents(inner)) - 1}|join")
    assert raw["turn6.inner"]["values"] == inner["values"]
    assert raw["turn6.inner_history"][0]["values"] == inner["values"]


def test_a_copy_has_the_whole_history_and_goes_on(main: dict[str, Api]) -> None:
    assert differences(main, "copy") == {}
    for api in main.values():
        assert api.raw["copy.state"]["values"] == api.raw["turn8.state"]["values"]
        assert [h["values"] for h in api.raw["copy.history"]] == [
            h["values"] for h in api.raw["history"]
        ]
    final = contents(main["delta"].raw["turn8.state"])
    assert contents(main["delta"].raw["copy.turn9.state"])[: len(final) + 1] == [*final, "turn 9"]


def test_forks_from_a_checkpoint_in_the_middle(main: dict[str, Api]) -> None:
    assert differences(main, "fork") == {}
    raw = main["delta"].raw
    for pos in MIDDLE[:2]:
        at = contents(raw[f"state_at{pos}"])
        assert contents(raw[f"fork{pos}.state"]) == [*at, f"forked {pos}"]
    for pos in MIDDLE:
        start = len(contents(raw[f"state_at{pos}"]))
        assert contents(raw[f"fork.from{pos}.state"])[start] == f"turn {30 + pos}"


def test_prune(
    main: dict[str, Api], flat: dict[str, Api], expected: dict[str, dict[str, list[str]]]
) -> None:
    assert differences(main, "prune") == {}
    assert differences(flat, "prune", "paused") == {}
    assert main["delta"].raw["prune.sub"] == {"pruned_count": 0}  # subgraph checkpoints: kept
    raw = flat["delta"].raw
    assert {n: contents(raw[f"flat{n}.state"]) for n in expected["flat"]} == expected["flat"]
    assert raw["prune.keep"] == {"pruned_count": 1}
    assert [h["values"] for h in raw["prune.keep.history"]] == [raw["flat6.state"]["values"]]
    assert raw["prune.keep.state"]["values"] == raw["flat6.state"]["values"]
    assert raw["prune.delete.state"]["status"] == 404
    paused = raw["paused.pruned"]
    assert paused["next"] == ["right"] and len(raw["paused.pruned.history"]) == 1
    assert paused["values"] == raw["paused.ask.state"]["values"]
    resumed = contents(raw["paused.resume.state"])
    assert f"right late yes {seen_when_paused(raw['paused.ask'])}" in resumed


def test_compaction_after_each_run(
    retention: dict[str, Api], expected: dict[str, dict[str, list[str]]]
) -> None:
    assert differences(retention, "kept") == {}
    raw = retention["delta"].raw
    # The same messages as LangGraph's in-memory checkpointer, which keeps every checkpoint.
    turns = {n: contents(raw[f"kept{n}.state"]) for n in expected["flat"]}
    assert turns == expected["flat"]
    for i in range(1, len(FLAT) + 1):
        assert len(raw[f"kept{i}.history"]) == 1
    assert len(raw["kept.sub.history"]) > 1  # subgraph checkpoints: not compacted any more


def test_a_thread_past_its_ttl_keeps_its_latest_state(flat: dict[str, Api]) -> None:
    assert differences(flat, "ttl") == {}
    raw = flat["delta"].raw
    assert raw["ttl.state"]["values"] == raw["flat6.state"]["values"]
    assert len(raw["ttl.history"]) == 1
    assert contents(raw["ttl.turn7.state"])[: len(contents(raw["ttl.state"]))] == contents(
        raw["ttl.state"]
    )


def test_supersteps_breakpoints_and_replaced_runs(others: dict[str, Api]) -> None:
    assert differences(others, "steps", "breakpoint", "rollback", "interrupt", "after") == {}
    raw = others["delta"].raw
    # As LangGraph's bulk_update_state leaves them: the superstep after the input replaces it.
    assert contents(raw["steps.state"]) == ["thought", "l", "r"]
    assert raw["breakpoint.state"]["next"] == ["join"]
    assert raw["rollback.replaced"]["status"] == 404  # a rolled-back run is deleted
    assert raw["interrupt.replaced"]["status"] == "interrupted"
    rolled = contents(raw["rollback.state"])
    assert "turn 4" not in rolled and rolled[-1].startswith("join")
    kept = contents(raw["interrupt.state"])
    assert "turn 6" in kept and kept[-1].startswith("join")


@pytest.mark.slow
async def test_a_run_taken_over_after_a_crash_goes_on_alike(
    make_server: Callable[..., ServerProcess], database_url: str, project: Path, tmp_path: Path
) -> None:
    """The server is killed while a run of each graph waits in its first node (its input and
    the checkpoints before the node stored, the run's writes and held checkpoints
    (``api.durable.saver``) in flight or not); restarted, each run is taken over and ends."""
    gate = project.parent / "release-70"
    proc = make_server(database_url, tmp_path / "data", config=project, name="takeover")
    await asyncio.to_thread(proc.start)
    apis: dict[str, Api] = {}
    runs: dict[str, tuple[str, str]] = {}
    timeout = httpx.Timeout(30.0, read=WAIT)
    async with httpx.AsyncClient(base_url=proc.url, timeout=timeout) as http:
        for graph in GRAPHS:
            api = apis[graph] = Api(http, graph)
            tid = await api.new_thread("thread")
            await play(api, tid, ["plain", "ask-right"], "before")
            runs[graph] = (tid, await api.started("held", tid, input=turn_input(70, "hold")))
    proc.kill()
    await asyncio.to_thread(proc.start)
    gate.touch()
    async with httpx.AsyncClient(base_url=proc.url, timeout=timeout) as http:
        for graph, (tid, run_id) in runs.items():
            api = apis[graph]
            api.http = http
            await api.keep("held.join", "GET", f"/threads/{tid}/runs/{run_id}/join")
            await api.keep("held.state", "GET", f"/threads/{tid}/state")
            await api.history("held.history", tid, limit=500)
            await play(api, tid, ["sub"], "after", first=71)
    assert differences(apis, "before", "held", "after") == {}
    raw = apis["delta"].raw
    held = contents(raw["held.state"])
    assert held[held.index("turn 70") + 1].startswith(f"think {held.index('turn 70') + 1}|turn 70")
    assert held[-1].startswith("join")
