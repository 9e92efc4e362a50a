"""A node's output holding a NUL character (a model or a tool can produce one): ``jsonb``
refuses it, and the step that stored the run's events with it failed, three attempts in a row,
until the run was stopped. The events are stored with each NUL as U+FFFD (``serde.dumps``), the
same for a client streaming the run and one reading it back; the checkpoint keeps the text as
the node wrote it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import httpx

from tests.api.conftest import one_graph_project

GRAPH = textwrap.dedent(
    """
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph


    def speak(state):
        return {"messages": [AIMessage("before\\x00after", id="said")]}


    g = StateGraph(MessagesState)
    g.add_node("speak", speak)
    g.add_edge(START, "speak")
    g.add_edge("speak", END)
    graph = g.compile()
    """
)


def said(events: list[tuple[str, str]]) -> list[str]:
    """The content of the ``speak`` node's message in each ``updates`` event."""
    return [
        json.loads(data)["speak"]["messages"][0]["content"]
        for name, data in events
        if name == "updates" and "speak" in data
    ]


async def read(response: httpx.Response) -> list[tuple[str, str]]:
    events, name = [], ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, line.removeprefix("data: ")))
    return events


async def test_a_nul_in_a_nodes_output_is_stored_and_streamed(
    database_url: str, tmp_path: Path
) -> None:
    with one_graph_project(database_url, tmp_path, "nul", "nul.py", GRAPH) as server:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            thread = (await http.post("/threads", json={})).json()["thread_id"]
            body = {"assistant_id": "nul", "input": {"messages": []}, "stream_mode": ["updates"]}
            async with http.stream("POST", f"/threads/{thread}/runs/stream", json=body) as live:
                streamed = await read(live)
            assert streamed[-1][0] == "end" and json.loads(streamed[-1][1])["status"] == "success"
            assert said(streamed) == ["before\ufffdafter"]

            runs = (await http.get(f"/threads/{thread}/runs")).json()
            assert [r["status"] for r in runs] == ["success"]
            path = f"/threads/{thread}/runs/{runs[0]['run_id']}/stream"
            async with http.stream("GET", path) as replay:
                assert said(await read(replay)) == ["before\ufffdafter"]

            state = (await http.get(f"/threads/{thread}/state")).json()
            assert state["values"]["messages"][0]["content"] == "before\x00after"
