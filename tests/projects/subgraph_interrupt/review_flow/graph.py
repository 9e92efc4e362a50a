"""The graph ``langgraph.json`` serves: ``prepare`` → ``review`` (a compiled subgraph:
``draft`` → ``approve``) → ``publish``."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from review_flow.steps import record, write_draft


class State(TypedDict, total=False):
    topic: str
    draft: str
    verdict: str
    log: Annotated[list[str], operator.add]


class Review(TypedDict, total=False):
    """The subgraph's state: the keys it shares with the parent, without the parent's log."""

    topic: str
    draft: str
    verdict: str


def prepare(state: State) -> State:
    record(f"prepare {state['topic']}")
    return {"log": ["prepared"]}


def draft(state: Review) -> Review:
    writer = get_stream_writer()
    writer({"progress": "drafting", "topic": state["topic"]})
    text = write_draft(state["topic"])
    writer({"progress": "drafted", "words": len(text.split())})
    return {"draft": text}


def approve(state: Review) -> Review:
    get_stream_writer()({"progress": "awaiting review"})
    # Runs again from the top when resumed: nothing before this line has a side effect.
    verdict = interrupt({"question": "Publish this draft?", "draft": state["draft"]})
    record(f"verdict {verdict}")
    return {"verdict": verdict}


def publish(state: State) -> State:
    record(f"publish {state['verdict']}")
    return {"log": [f"published ({state['verdict']})"]}


review_builder = StateGraph(Review)
review_builder.add_node("draft", draft)
review_builder.add_node("approve", approve)
review_builder.add_edge(START, "draft")
review_builder.add_edge("draft", "approve")
review_builder.add_edge("approve", END)
review = review_builder.compile()

builder = StateGraph(State)
builder.add_node("prepare", prepare)
builder.add_node("review", review)
builder.add_node("publish", publish)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "review")
builder.add_edge("review", "publish")
builder.add_edge("publish", END)
graph = builder.compile()
