"""Checkpoint storage of a long thread: bytes per agent step, and what the alternatives save.

The built-in agent graph runs ``steps`` agent steps on one thread, each with one cheap tool call
(``list_files``), driven by a scripted chat model, in this process on a ``PooledSaver`` and a
fresh database per variant:

- ``baseline``: ``messages`` as a plain ``add_messages`` reducer channel (the agent before it
  adopted ``DeltaChannel``): every checkpoint that changes it stores the whole list again;
- ``delta``: the agent as it is: ``messages`` is LangGraph's ``DeltaChannel`` (beta), which
  stores a snapshot every ``snapshot_frequency`` updates and otherwise only the writes;
- ``prune``: the baseline, compacted with ``AsyncPostgresSaver.aprune(strategy="keep_latest")``
  at every measuring point (``aprune`` refuses threads with a ``DeltaChannel``);
- ``compact``: the agent as it is, compacted with :func:`api.durable.compaction.compact_thread`
(what
  ``THREADLINE_CHECKPOINT_RETENTION=latest`` does after each run, and ``POST /threads/prune``
  with ``keep_latest``) at every measuring point: the ``DeltaChannel`` is snapshotted at the
  latest checkpoint, then the older ones go.

Every ``every`` steps the model, before it answers, measures: the thread's rows in
``checkpoints``, ``checkpoint_blobs`` and ``checkpoint_writes`` (sum of ``pg_column_size``: bytes
as stored, TOAST-compressed), the three tables' ``pg_total_relation_size`` (indexes and page
overhead included), and the JSON of the messages it was given (``api.platform.serde.dumps``, as the
service sends them). At that moment the previous step's checkpoint is committed
(``durability="sync"``) and the current step has written nothing yet, so the numbers are exact.

The ``baseline`` and ``prune`` variants swap ``AgentState`` for :func:`reducer_state` in the
agent's modules of this process only (:func:`apply_state`); ``delta`` uses
:func:`delta_state`, the agent's own shape with this run's ``snapshot_frequency``.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    UsageMetadata,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig

from agent.message_batches import add_messages_batch
from api.builtin_agent.wiring import agent_tools
from api.durable.compaction import compact_thread
from api.durable.saver import PooledSaver
from api.engine.runtime import saver_concurrency
from api.platform.database import open_pool, prepare_schema
from api.platform.serde import dumps

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
PATHS = (".", "./", "./.")
"""``list_files`` arguments, cycled: the same call three times in a row would stop the agent as
stuck."""
VARIANTS = ("baseline", "delta", "prune", "compact")


def delta_state(snapshot_frequency: int) -> type:
    """``AgentState`` with ``messages`` as a ``DeltaChannel`` (the change the report proposes)."""
    from langgraph.channels import DeltaChannel

    from agent.state import AgentState

    annotations = dict(AgentState.__annotations__)
    annotations["messages"] = Annotated[
        list[AnyMessage], DeltaChannel(add_messages_batch, snapshot_frequency=snapshot_frequency)
    ]
    from typing import TypedDict

    made: type = TypedDict("AgentState", annotations, total=False)  # type: ignore[misc]
    return made


def reducer_state() -> type:
    """``AgentState`` with ``messages`` as a plain ``add_messages`` reducer channel."""
    from typing import TypedDict

    from langgraph.graph.message import add_messages

    from agent.state import AgentState

    annotations = dict(AgentState.__annotations__)
    annotations["messages"] = Annotated[list[AnyMessage], add_messages]
    made: type = TypedDict("AgentState", annotations, total=False)  # type: ignore[misc]
    return made


def apply_state(state: type) -> Callable[[], None]:
    """Make the agent's modules use ``state`` as ``AgentState`` (this process only), as if
    agent/state.py itself were changed; returns the function that undoes it."""
    import sys

    import agent.graph  # noqa: F401  (loads the modules that name the schema)
    from agent.state import AgentState

    # The graph, and the nodes whose type hints LangGraph reads for their input schema.
    patched = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("agent") and getattr(m, "AgentState", None) is AgentState
    ]
    for module in patched:
        module.AgentState = state  # type: ignore[attr-defined]

    def undo() -> None:
        for module in patched:
            module.AgentState = AgentState  # type: ignore[attr-defined]

    return undo


@contextlib.contextmanager
def patched_state(state: type | None) -> Iterator[None]:
    """Build the agent graph with another state schema (``None``: the agent's own)."""
    undo = apply_state(state) if state is not None else None
    try:
        yield
    finally:
        if undo:
            undo()


class StepModel(BaseChatModel):
    """Answers each agent step with one ``list_files`` call, ``steps`` times, then "done".

    Before answering step ``k + 1`` with ``k`` a multiple of ``every``, it awaits ``on_boundary(k,
    messages)``: the graph waits while the database is measured.
    """

    steps: int
    every: int
    on_boundary: Callable[[int, list[BaseMessage]], Awaitable[None]]

    @property
    def _llm_type(self) -> str:
        return "bench-step-model"

    def bind_tools(self, tools: Any, **kwargs: Any) -> StepModel:
        return self

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:  # pragma: no cover
        raise NotImplementedError("async only")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        history = [m for m in messages if m.type != "system"]
        done = sum(1 for m in history if isinstance(m, AIMessage))
        if done and done % self.every == 0:
            await self.on_boundary(done, history)
        usage = UsageMetadata(input_tokens=50, output_tokens=10, total_tokens=60)
        if done < self.steps:
            call = ToolCall(
                name="list_files",
                args={"path": PATHS[done % len(PATHS)]},
                id=f"call_{done + 1:04d}",
                type="tool_call",
            )
            reply = AIMessage(
                content=f"Step {done + 1}: listing the workspace to check nothing changed.",
                tool_calls=[call],
                usage_metadata=usage,
            )
        else:
            reply = AIMessage(content="Done: the workspace stayed empty.", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


async def table_bytes(conn: Any, thread_id: str) -> dict[str, int]:
    """Stored bytes of the thread's rows per checkpoint table, and the tables' total size."""
    out: dict[str, int] = {}
    for table in TABLES:
        cur = await conn.execute(
            f"SELECT coalesce(sum(pg_column_size(t.*)), 0)::bigint AS b, count(*) AS n"
            f" FROM {table} t WHERE thread_id = %s",
            (thread_id,),
        )
        row = await cur.fetchone()
        out[table] = int(row["b"])
        out[table + "_rows"] = int(row["n"])
    cur = await conn.execute(
        "SELECT coalesce(sum(octet_length(blob)), 0)::bigint AS b FROM checkpoint_blobs"
        " WHERE thread_id = %s",
        (thread_id,),
    )
    out["blobs_raw"] = int((await cur.fetchone())["b"])
    cur = await conn.execute(
        "SELECT " + " + ".join(f"pg_total_relation_size('{t}')" for t in TABLES) + " AS b"
    )
    row = await cur.fetchone()
    out["relations"] = int(row["b"])
    return out


def fit(xs: list[float], ys: list[float]) -> dict[str, Any]:
    """Least-squares ``y = a + b x + c x^2``, and the exponent of ``y ~ x^k`` (log-log slope).

    ``quadratic_share`` is the part of the last value the ``c x^2`` term makes: above 0.2 the
    growth is called quadratic (``k`` alone understates it while the linear term still dominates).
    """
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    c, b, a = np.polyfit(x, y, 2)
    k = float(np.polyfit(np.log(x), np.log(np.maximum(y, 1.0)), 1)[0])
    last = float(y[-1]) or 1.0
    share = float(c * x[-1] ** 2) / last
    return {
        "a": round(float(a)),
        "b_per_step": round(float(b), 1),
        "c_per_step2": round(float(c), 2),
        "exponent": round(k, 2),
        "quadratic_share": round(share, 2),
        "growth": "quadratic" if share > 0.2 else "linear",
    }


def seed_workspace(data_dir: Path, thread_id: str, files: int) -> None:
    """Put ``files`` small files in the thread's workspace, so ``list_files`` answers with a
    listing of a realistic size rather than an empty one."""
    from agent.tools.workspace import ensure_workspace

    root = ensure_workspace(data_dir, thread_id)
    for i in range(files):
        path = root / ("src" if i % 2 else "tests") / f"module_{i:03d}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# module {i}\n" + "x = 1\n" * (i % 7 + 1))


async def run_variant(
    url: str,
    data_dir: Path,
    variant: str,
    *,
    steps: int,
    every: int,
    snapshot_frequency: int,
    files: int = 0,
) -> dict[str, Any]:
    """One thread of ``steps`` agent steps under ``variant``; measurements every ``every``."""
    from agent import ApprovalPolicy, build_graph
    from agent.limits import Limits
    from agent.settings import AgentSettings

    thread_id = str(uuid.uuid4())
    seed_workspace(data_dir, thread_id, files)
    points: list[dict[str, Any]] = []
    graphs: list[Any] = []  # the graph, once built: compaction reads the thread's state with it
    async with open_pool(url, max_size=4) as pool:
        saver = PooledSaver(pool, concurrency=saver_concurrency(4))
        await prepare_schema(pool, saver)
        prune_s = 0.0

        async def measure(k: int, messages: list[BaseMessage]) -> None:
            nonlocal prune_s
            point: dict[str, Any] = {"steps": k, "messages_bytes": len(dumps(messages))}
            async with pool.connection() as conn:
                if variant == "prune":
                    before = await table_bytes(conn, thread_id)
                    point["before_prune"] = sum(before[t] for t in TABLES)
                    t0 = time.perf_counter()
                    await saver.aprune([thread_id], strategy="keep_latest")
                    prune_s = time.perf_counter() - t0
                    point["prune_ms"] = round(1000 * prune_s, 1)
                elif variant == "compact":
                    before = await table_bytes(conn, thread_id)
                    point["before_prune"] = sum(before[t] for t in TABLES)
                    t0 = time.perf_counter()
                    await compact_thread(pool, saver, graphs[0], thread_id)
                    point["prune_ms"] = round(1000 * (time.perf_counter() - t0), 1)
                sizes = await table_bytes(conn, thread_id)
            point.update(sizes)
            point["storage_bytes"] = sum(sizes[t] for t in TABLES)
            point["ratio"] = round(point["storage_bytes"] / point["messages_bytes"], 2)
            points.append(point)

        model = StepModel(steps=steps, every=every, on_boundary=measure)
        limits = Limits(max_steps=steps + 20, max_verify_attempts=1)
        delta = variant in ("delta", "compact")
        state = delta_state(snapshot_frequency) if delta else reducer_state()
        with patched_state(state):
            graph = build_graph(
                model=model,
                tools=agent_tools(AgentSettings()),
                checkpointer=saver,
                data_dir=data_dir,
                policy=ApprovalPolicy({"*": "auto"}),
                limits=limits,
            )
        graphs.append(graph)
        channel = type(graph.channels["messages"]).__name__
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": limits.recursion_limit(),
        }
        inp = {"messages": [HumanMessage("List the workspace once per step until told to stop.")]}
        t0 = time.perf_counter()
        async for _ in graph.astream(inp, config, stream_mode="updates", durability="sync"):
            pass
        wall = time.perf_counter() - t0
        # Reading the thread back: what a resume or GET /state pays; twice, to see whether message
        # ids survive a reload.
        t1 = time.perf_counter()
        state1 = await graph.aget_state(config)
        load_ms = 1000 * (time.perf_counter() - t1)
        state2 = await graph.aget_state(config)
        ids1 = [m.id for m in state1.values["messages"]]
        ids2 = [m.id for m in state2.values["messages"]]
        async with pool.connection() as conn:
            final = await table_bytes(conn, thread_id)
            cur = await conn.execute(
                "SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s", (thread_id,)
            )
            found = await cur.fetchone()
            n_checkpoints = int(found["n"]) if found else 0
    messages = state1.values["messages"]
    last = points[-1] if points else None
    xs = [p["steps"] for p in points]
    return {
        "variant": variant,
        "channel": channel,
        "steps": state1.values.get("step"),
        "status": state1.values.get("status"),
        "messages": len(messages),
        "ids_stable": ids1 == ids2 and all(ids1),
        "points": points,
        "fit": fit(xs, [p["storage_bytes"] for p in points]) if len(points) >= 3 else None,
        "bytes_per_step": round(last["storage_bytes"] / last["steps"]) if last else None,
        "ratio_at_end": last["ratio"] if last else None,
        "final": final,
        "checkpoints_left": n_checkpoints,
        "run_s": round(wall, 2),
        "ms_per_step": round(1000 * wall / steps, 1),
        "load_state_ms": round(load_ms, 1),
        "snapshot_frequency": snapshot_frequency if delta else None,
    }


async def run(
    admin_url: str,
    tmp: Path,
    *,
    steps: int = 100,
    every: int = 10,
    snapshot_frequency: int = 100,
    files: int = 0,
    variants: Sequence[str] = VARIANTS,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every variant on a fresh database of its own; the databases are dropped afterwards."""
    from bench import pg

    out: dict[str, Any] = {"steps": steps, "every": every, "variants": {}}
    for variant in variants:
        name = pg.new_name("bench_ckpt")
        url = pg.create_database(admin_url, name)
        try:
            result = await run_variant(
                url,
                tmp / f"ckpt-{variant}",
                variant,
                steps=steps,
                every=every,
                snapshot_frequency=snapshot_frequency,
                files=files,
            )
        except Exception as err:  # one broken alternative must not sink the suite
            result = {"variant": variant, "error": f"{type(err).__name__}: {err}"[:400]}
        finally:
            pg.drop_database(admin_url, name)
        out["variants"][variant] = result
        if "error" in result:
            say(f"  checkpoints {variant}: failed: {result['error']}")
        else:
            say(
                f"  checkpoints {variant}: {result['bytes_per_step']} B/step, "
                f"{result['ratio_at_end']}x messages at {steps} steps, growth "
                f"{(result['fit'] or {}).get('growth')}, {result['ms_per_step']} ms/step"
            )
    return out
