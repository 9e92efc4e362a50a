"""A run's ``context`` reaches the graph's ``Runtime.context``, as on LangGraph Server
(``api.engine.run_context``): from ``context`` or from ``config.configurable``, mirrored into the
other, filtered by the graph's ``context_schema``; both at once is a 400."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import one_graph_project
from tests.utils.runs import sdk_client
from tests.utils.server import ServerProcess

CONTEXT_GRAPH = textwrap.dedent(
    '''
    """What a node sees of its run's context, through both of LangGraph's ways."""
    from dataclasses import dataclass
    from typing import TypedDict

    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime


    @dataclass
    class Context:
        user_id: str
        model: str = "small"


    class State(TypedDict, total=False):
        seen: dict


    def look(state: State, config: RunnableConfig, runtime: Runtime[Context]) -> State:
        mirrored = {
            k: v for k, v in (config.get("configurable") or {}).items()
            if k in ("user_id", "model", "stray")
        }
        return {
            "seen": {
                "user_id": runtime.context.user_id,
                "model": runtime.context.model,
                "type": type(runtime.context).__name__,
                "configurable": mirrored,
            }
        }


    builder = StateGraph(State, context_schema=Context)
    builder.add_node("look", look)
    builder.add_edge(START, "look")
    builder.add_edge("look", END)
    graph = builder.compile()
    '''
)


@pytest.fixture(scope="module")
def context_server(
    module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("context")
    with one_graph_project(
        module_database_url, root, "ctx", "context_graph.py", CONTEXT_GRAPH
    ) as proc:
        yield proc


async def _seen(server: ServerProcess, **body: Any) -> Any:
    async with sdk_client(server.url) as client:
        thread = await client.threads.create()
        values = await client.runs.wait(thread["thread_id"], "ctx", input={}, **body)
        return values["seen"]


async def test_context_reaches_runtime_context_and_configurable(
    context_server: ServerProcess,
) -> None:
    seen = await _seen(context_server, context={"user_id": "ada", "model": "large", "stray": 1})
    assert seen == {
        "user_id": "ada",
        "model": "large",
        "type": "Context",
        # mirrored, without what the schema does not name
        "configurable": {"user_id": "ada", "model": "large"},
    }


async def test_configurable_alone_is_the_context_too(context_server: ServerProcess) -> None:
    seen = await _seen(context_server, config={"configurable": {"user_id": "bo"}})
    assert seen["user_id"] == "bo" and seen["model"] == "small" and seen["type"] == "Context"
    assert seen["configurable"] == {"user_id": "bo"}


async def test_both_at_once_is_refused(context_server: ServerProcess) -> None:
    from langgraph_sdk.errors import BadRequestError

    async with sdk_client(context_server.url) as client:
        thread = await client.threads.create()
        with pytest.raises(BadRequestError, match="both configurable and context"):
            await client.runs.create(
                thread["thread_id"],
                "ctx",
                input={},
                context={"user_id": "ada"},
                config={"configurable": {"user_id": "bo"}},
            )


async def test_a_missing_required_field_fails_the_run(
    context_server: ServerProcess,
) -> None:
    async with sdk_client(context_server.url) as client:
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], "ctx", input={}, context={"x": 1})
        await client.runs.join(thread["thread_id"], run["run_id"])
        done = await client.runs.get(thread["thread_id"], run["run_id"])
        assert done["status"] == "error"


async def test_a_context_that_is_not_an_object_is_a_422(context_server: ServerProcess) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=context_server.url, timeout=30) as http:
        thread = (await http.post("/threads", json={})).json()["thread_id"]
        response = await http.post(
            f"/threads/{thread}/runs", json={"assistant_id": "ctx", "context": ["user_id"]}
        )
        assert response.status_code == 422
        assert "context" in response.json()["detail"]
