"""The agent on a real OpenAI-compatible server (llama.cpp's, SmolLM2-135M-Instruct), end to end.

A real ``threadline serve`` process, pointed at :class:`ModelProxy` in front of the real server,
runs a free-text task over HTTP/SSE (the official SDK). What is checked is the wire, not the
model's skill: streamed tokens arrive as ``messages-tuple`` chunks, a tool call is made and
its error is fed back to the model, tokens are counted, and a timeout or a 500 from the model
ends the run in ``error`` with a message that names the endpoint.

The tool call is forced: the proxy sets ``tool_choice`` to ``read_file`` on the task's first
model call, and llama.cpp's ``chatml-function-calling`` format constrains the model's output to
that call (its arguments are the model's own). The workspace of a free-text task is empty, so
the file does not exist whatever path the model picks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.real_model.conftest import MODEL
from tests.real_model.proxy import ERROR_MESSAGE, ModelProxy
from tests.utils.runs import collect, sdk_client
from tests.utils.server import ServerProcess

NODE_ATTEMPTS = 3
"""``RetryPolicy(max_attempts=3)`` of the agent node (``agent.graph``)."""
TASK = "Use the read_file tool to read the file notes.txt, then tell me what it says."


def model_env(proxy: ModelProxy, **settings: str) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "unused",  # llama.cpp's server ignores it
        "OPENAI_BASE_URL": proxy.base_url,
        "OPENAI_MODEL": MODEL,
        "THREADLINE_MAX_STEPS": "3",  # a 135M model may call tools for ever
        "OPENAI_MAX_TOKENS": "256",  # ... or write until its context is full
        **settings,
    }


async def run_task(server: ServerProcess, timeout: float = 150.0) -> tuple[list[Any], Any]:
    """A free-text run streamed to its end: (its parts, the thread's final state)."""
    async with sdk_client(server.url) as client:
        tid = (await client.threads.create())["thread_id"]
        stream = client.runs.stream(
            tid,
            "agent",
            input={"messages": [{"role": "user", "content": TASK}]},
            stream_mode=["messages-tuple", "custom", "updates"],
        )
        parts = await collect(stream, timeout)
        return parts, await client.threads.get_state(tid)


async def test_agent_streams_calls_a_tool_and_gets_its_error_back(
    real_model_url: str,
    database_url: str,
    tmp_path: Path,
    make_server: Callable[..., ServerProcess],
) -> None:
    with ModelProxy(real_model_url, force_tool="read_file") as proxy:
        server = make_server(database_url, tmp_path / "data", env=model_env(proxy)).start()
        parts, state = await run_task(server)

    end = parts[-1]
    assert end.event == "end" and end.data["status"] == "success", end
    # Streamed tokens: the model's answer came as several messages-tuple chunks of the agent node.
    chunks = [p.data for p in parts if p.event == "messages"]
    agent_chunks = [c for c, meta in chunks if meta.get("langgraph_node") == "agent"]
    assert len(agent_chunks) >= 2, chunks
    assert all(c["type"] == "AIMessageChunk" for c in agent_chunks)

    messages = state["values"]["messages"]
    calls = [c for m in messages if m["type"] == "ai" for c in m.get("tool_calls") or []]
    assert calls and calls[0]["name"] == "read_file", messages
    call_id = calls[0]["id"]
    # The tool failed (no such file), and its error went back to the model as the call's result.
    result = next(m for m in messages if m["type"] == "tool" and m["tool_call_id"] == call_id)
    assert result["status"] == "error", result
    assert len(proxy.requests) >= 2, "the model was not asked again after the tool ran"
    sent = [m for m in proxy.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in sent] == [(call_id, result["content"])]
    assert proxy.requests[0]["stream"] is True  # the agent streamed the completions
    assert {t["function"]["name"] for t in proxy.requests[0]["tools"]} >= {"read_file"}

    # Usage: the server's token counts, summed in the thread's state and the step events.
    usage = state["values"]["usage"]
    assert usage["steps"] == len(proxy.requests)
    custom = [p.data for p in parts if p.event == "custom"]
    step_tokens = [e["tokens"] for e in custom if e.get("type") == "step_finished"]
    assert len(step_tokens) == usage["steps"] and all(t > 0 for t in step_tokens), custom
    assert usage["tokens"] == sum(step_tokens)
    budgets = [e for e in custom if e.get("type") == "budget" and "left" in e]
    assert budgets[-1]["left"]["tokens"] == 200_000 - usage["tokens"], budgets[-1]


async def test_a_model_timeout_ends_the_run_with_a_clear_error(
    real_model_url: str,
    database_url: str,
    tmp_path: Path,
    make_server: Callable[..., ServerProcess],
) -> None:
    with ModelProxy(real_model_url, mode="delay", delay=4.0) as proxy:
        env = model_env(proxy, OPENAI_TIMEOUT="1", OPENAI_MAX_RETRIES="1")
        server = make_server(database_url, tmp_path / "data", env=env).start()
        parts, _ = await run_task(server, timeout=60)

    end = parts[-1]
    assert end.event == "end" and end.data["status"] == "error", end
    error = end.data["error"]
    assert f"the model endpoint {proxy.base_url} ({MODEL})" in error, error
    assert "did not answer within 1.0 s (OPENAI_TIMEOUT; 1 retries" in error, error
    assert "Traceback" not in error and "\n" not in error
    # The agent node tries a failed step 3 times (its RetryPolicy), each with 1 + 1 requests.
    assert len(proxy.requests) == NODE_ATTEMPTS * 2
    assert [p.data["message"] for p in parts if p.event == "error"] == [error.split(": ", 1)[1]]


async def test_a_model_server_error_ends_the_run_with_a_clear_error(
    real_model_url: str,
    database_url: str,
    tmp_path: Path,
    make_server: Callable[..., ServerProcess],
) -> None:
    with ModelProxy(real_model_url, mode="error") as proxy:
        env = model_env(proxy, OPENAI_MAX_RETRIES="0")
        server = make_server(database_url, tmp_path / "data", env=env).start()
        parts, state = await run_task(server, timeout=60)

    end = parts[-1]
    assert end.event == "end" and end.data["status"] == "error", end
    error = end.data["error"]
    assert f"the model endpoint {proxy.base_url} ({MODEL}) answered HTTP 500" in error, error
    assert ERROR_MESSAGE in error and "Traceback" not in error
    assert len(proxy.requests) == NODE_ATTEMPTS  # no client retry, the node's own 3 tries
    assert state["values"]["messages"][-1]["content"] == TASK  # the input stays, nothing after
