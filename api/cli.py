"""The ``threadline`` command: serve, run a task, resume a thread, list tasks."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import uuid
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from pydantic import ValidationError

from agent.tasks import CATALOG, get_task
from api.console import is_cached, render_custom, render_update
from api.runtime import BUILTIN_ASSISTANT, open_runtime
from api.settings import Settings


def _param(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param takes KEY=VALUE, not {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="threadline", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the HTTP service and web page")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--config", help="a langgraph.json-style file of graphs to serve too")
    run = sub.add_parser("run", help="run a task to the end in this process, printing progress")
    run.add_argument("text", nargs="*", help="a free-form instruction (instead of --task)")
    run.add_argument("--task", help="a demo task (see `threadline tasks`)")
    run.add_argument("--param", action="append", type=_param, default=[], metavar="KEY=VALUE")
    run.add_argument("--thread", help="thread id to use (default: a new one)")
    run.add_argument(
        "--auto-approve", action="store_true", help="approve every tool call without asking"
    )
    resume = sub.add_parser("resume", help="continue a thread from its last checkpoint")
    resume.add_argument("thread_id")
    resume.add_argument("--auto-approve", action="store_true")
    sub.add_parser("tasks", help="list the demo tasks")
    return p


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as err:
        problems = "\n".join(
            f"  - {'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in err.errors()
        )
        sys.exit(f"threadline: invalid settings:\n{problems}")


def _ask(value: dict[str, Any]) -> dict[str, Any]:
    print(f"\n{value.get('tool')} wants to run with {json.dumps(value.get('args'))}")
    while True:
        answer = input("approve / edit / reject? [a/e/r] ").strip().lower()
        if answer in ("a", "approve"):
            return {"decision": "approve"}
        if answer in ("r", "reject"):
            return {"decision": "reject", "message": input("message for the agent: ")}
        if answer in ("e", "edit"):
            try:
                return {"decision": "edit", "args": json.loads(input("new args (JSON): "))}
            except json.JSONDecodeError as err:
                print(f"not JSON: {err}")


async def drive(settings: Settings, thread_id: str, first_input: Any, *, auto_approve: bool) -> int:
    """Stream the run to the terminal, answering approvals; returns the exit code."""
    async with open_runtime(settings) as runtime:
        graph = runtime.graphs[BUILTIN_ASSISTANT]
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": settings.limits.recursion_limit(),
        }
        print(
            f"thread {thread_id} · model: {settings.model_label} · "
            f"database: {runtime.database.mode}"
        )
        next_input: Any = first_input
        while True:
            async for mode, data in graph.astream(
                next_input, config, stream_mode=["updates", "custom"], durability="sync"
            ):
                if mode == "custom":
                    line = render_custom(data)
                    if line:
                        print(line, flush=True)
                elif not is_cached(data):
                    for line in render_update(data):
                        print(line, flush=True)
            state = await graph.aget_state(config)
            pending = [i for t in state.tasks for i in t.interrupts]
            if not pending:
                break
            if not auto_approve and not sys.stdin.isatty():
                print(
                    f"\nthread {thread_id} waits for approval of {len(pending)} call(s). "
                    "Answer with "
                    f"`threadline resume {thread_id} --auto-approve`, on a terminal with "
                    f"`threadline resume {thread_id}`, or through the API "
                    f"(POST /threads/{thread_id}/approvals)."
                )
                return 3
            answers = {
                i.id: {"decision": "approve"} if auto_approve else _ask(i.value) for i in pending
            }
            next_input = Command(resume=answers)
        values = state.values
        status = values.get("status")
        verdict = values.get("verdict") or {}
        print(
            f"\nstatus: {status}"
            + (f" · check: {verdict.get('output', '').strip()}" if verdict else "")
        )
        print(f"thread: {thread_id}")
        return 0 if status in ("verified", "agent_done") else 1


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "tasks":
        for task in CATALOG.values():
            params = ", ".join(
                f"{k}={v.get('default')}" for k, v in task.describe()["params"].items()
            )
            print(f"{task.name:10} {task.title}" + (f"  ({params})" if params else ""))
        return
    settings = load_settings()
    if args.command == "serve":
        from api.server import serve

        serve(settings, host=args.host, port=args.port, config=args.config)
        return
    if args.command == "run":
        if bool(args.task) == bool(args.text):
            sys.exit("threadline run: give either --task NAME or a free-form instruction")
        if args.task:
            try:
                task = get_task(args.task)
                task.parse_params(dict(args.param))
            except (KeyError, ValueError) as err:
                sys.exit(f"threadline run: {err.args[0]}")
            first: Any = {"task": {"name": args.task, "params": dict(args.param)}}
        else:
            first = {"messages": [{"role": "user", "content": " ".join(args.text)}]}
        thread_id = args.thread or str(uuid.uuid4())
        sys.exit(asyncio.run(drive(settings, thread_id, first, auto_approve=args.auto_approve)))
    if args.command == "resume":
        sys.exit(asyncio.run(drive(settings, args.thread_id, None, auto_approve=args.auto_approve)))


if __name__ == "__main__":
    main()
