"""Graph factories (``api.project.graph_factory``) as LangGraph Server calls them: made again for
each
run with that run's config, its assistant's merged in, and a ``ServerRuntime`` whose
``execution_runtime`` carries the run's context; a context manager's graph is held open while the
run runs. One graph then serves several assistants with other models or prompts."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.api.conftest import FAST
from tests.utils.runs import sdk_client
from tests.utils.server import ServerProcess, ServerStartError, serving

FACTORIES = textwrap.dedent(
    '''
    """Factories of a one-node graph that says which model it was made for."""
    import contextlib
    import os
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph_sdk.runtime import ServerRuntime


    class State(TypedDict, total=False):
        made_for: str
        said: str


    def _graph(made_for: str):
        builder = StateGraph(State)
        builder.add_node("say", lambda state: {"made_for": made_for, "said": "hello"})
        builder.add_edge(START, "say")
        builder.add_edge("say", END)
        return builder.compile()


    def by_config(config):
        if config["configurable"].get("explode"):
            raise RuntimeError("no such model: " + config["configurable"]["explode"])
        return _graph(config["configurable"].get("model", "default"))


    async def by_runtime(config, runtime: ServerRuntime):
        run = runtime.execution_runtime
        tier = (run.context or {}).get("tier", "none") if run else "reading"
        return _graph(f"{runtime.access_context}/{tier}")


    @contextlib.asynccontextmanager
    async def held(config):
        log = os.environ["FACTORY_LOG"]
        with open(log, "a") as f:
            f.write("open\\n")
        try:
            yield _graph("held")
        finally:
            with open(log, "a") as f:
                f.write("closed\\n")


    def too_many(a, b, c):
        return _graph("never")
    '''
)


def _project(root: Path, graphs: dict[str, object]) -> Path:
    root.mkdir(parents=True)
    (root / "factories.py").write_text(FACTORIES)
    config = root / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    return config


@pytest.fixture(scope="module")
def factory_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("factories")
    log = root / "factory.log"
    config = _project(
        root / "project",
        {
            "by_config": {"path": "./factories.py:by_config", "description": "One per model"},
            "by_runtime": "./factories.py:by_runtime",
            "held": "./factories.py:held",
        },
    )
    proc = ServerProcess(
        module_database_url,
        root / "data",
        config=config,
        env={"FACTORY_LOG": str(log)},
        name="factories",
        **FAST,
    )
    with serving(proc):
        yield proc, log


async def test_each_assistant_gets_the_graph_its_config_makes(
    factory_server: tuple[ServerProcess, Path],
) -> None:
    proc, _ = factory_server
    async with sdk_client(proc.url) as client:
        big = await client.assistants.create("by_config", config={"configurable": {"model": "big"}})
        thread = (await client.threads.create())["thread_id"]
        assert (await client.runs.wait(thread, big["assistant_id"], input={}))["made_for"] == "big"
        thread = (await client.threads.create())["thread_id"]
        plain = await client.runs.wait(thread, "by_config", input={})
        assert plain["made_for"] == "default"
        own = await client.runs.wait(
            thread, big["assistant_id"], input={}, config={"configurable": {"model": "small"}}
        )
        assert own["made_for"] == "small"  # the run's config wins over its assistant's
        schemas = await client.assistants.get_schemas(big["assistant_id"])
        assert "made_for" in schemas["state_schema"]["properties"]
        # The langgraph.json entry's description is its default assistant's, as on LangGraph.
        assert (await client.assistants.get("by_config"))["description"] == "One per model"


async def test_a_factory_that_fails_for_a_run_fails_that_run_only(
    factory_server: tuple[ServerProcess, Path],
) -> None:
    proc, _ = factory_server
    async with sdk_client(proc.url) as client:
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(
            thread, "by_config", input={}, config={"configurable": {"explode": "gpt-9"}}
        )
        await client.runs.join(thread, run["run_id"])
        done = await client.runs.get(thread, run["run_id"])
        assert done["status"] == "error"
        thread = (await client.threads.create())["thread_id"]
        assert (await client.runs.wait(thread, "by_config", input={}))["made_for"] == "default"


async def test_the_runtime_carries_the_runs_context_when_it_executes(
    factory_server: tuple[ServerProcess, Path],
) -> None:
    proc, _ = factory_server
    async with sdk_client(proc.url) as client:
        thread = (await client.threads.create())["thread_id"]
        out = await client.runs.wait(thread, "by_runtime", input={}, context={"tier": "gold"})
        assert out["made_for"] == "threads.create_run/gold"


async def test_a_context_managers_graph_is_open_while_its_run_runs(
    factory_server: tuple[ServerProcess, Path],
) -> None:
    proc, log = factory_server
    before = log.read_text().splitlines()  # opened and closed once, at start-up
    assert before == ["open", "closed"]
    async with sdk_client(proc.url) as client:
        thread = (await client.threads.create())["thread_id"]
        assert (await client.runs.wait(thread, "held", input={}))["made_for"] == "held"
    assert log.read_text().splitlines() == ["open", "closed", "open", "closed"]


def test_a_factory_this_server_cannot_call_stops_the_start(
    tmp_path: Path, module_database_url: str, make_server: Callable[..., ServerProcess]
) -> None:
    config = _project(tmp_path / "project", {"bad": "./factories.py:too_many"})
    proc = make_server(module_database_url, tmp_path / "data", config=config, name="bad")
    with pytest.raises(ServerStartError, match="exited with code 1"):
        proc.start()
    log = proc.log_path.read_text()
    assert "Traceback" not in log
    [line] = [x for x in log.splitlines() if x.startswith("threadline: ")]
    assert "graph 'bad': graph factory 'too_many' must take no parameter" in line
