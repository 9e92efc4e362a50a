"""The ``threadline`` command: serve, run a task, resume a thread, list tasks."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import uuid
from typing import Any, TypeVar

from pydantic import AliasChoices, ValidationError
from pydantic_settings import BaseSettings
from pydantic_settings.exceptions import SettingsError

from agent.settings import AgentSettings
from agent.tasks import CATALOG, get_task
from api.platform.settings import Settings
from cli import terminal
from cli.terminal import ServerBackend, find_server

AnySettings = TypeVar("AnySettings", bound=BaseSettings)


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
    keys = sub.add_parser("keys", help="built-in API keys (THREADLINE_AUTH=keys)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key; prints it (last line) once")
    create.add_argument("--identity", required=True, help="who the key's requests act as")
    create.add_argument(
        "--permission",
        action="append",
        default=[],
        help="a permission of the identity (repeatable), e.g. threadline:review",
    )
    keys_sub.add_parser("list", help="list keys (ids, identities, permissions; never the keys)")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id (see `keys list`)")
    revoke.add_argument("key_id")
    return p


def load_settings() -> tuple[Settings, AgentSettings]:
    """The service's settings and the built-in agent's, or an exit with every problem of both in
    one message (no traceback)."""
    problems: list[str] = []
    settings = _read(Settings, problems)
    agent = _read(AgentSettings, problems)
    if settings is None or agent is None:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        sys.exit(f"threadline: invalid settings:\n{listed}")
    return settings, agent


def _read(kind: type[AnySettings], problems: list[str]) -> AnySettings | None:
    """``kind`` read from the environment, or None with its problems added to ``problems``."""
    try:
        return kind()
    except (ValidationError, SettingsError) as err:
        problems.extend(settings_problems(err))
        return None


def settings_problems(error: ValidationError | SettingsError) -> list[str]:
    """One line per problem, each naming the environment variable to fix."""
    if isinstance(error, SettingsError):  # a settings source failed; no field was validated
        field = re.search(r'field "(\w+)"', str(error))
        where = _variable((field.group(1),)) if field else "settings"
        return [f"{where}: {error.__cause__ or error}"]
    return [
        f"{_variable(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in error.errors()
    ]


def _variable(loc: tuple[int | str, ...]) -> str:
    """``("cors_origins", 0)`` → ``THREADLINE_CORS_ORIGINS[0]``; an alias (``DATABASE_URL``) is
    already the variable's name; no location: the settings as a whole."""
    if not loc:
        return "settings"
    head, *rest = loc
    name = str(head)
    field = Settings.model_fields.get(name) or AgentSettings.model_fields.get(name)
    if field is not None:
        alias = field.validation_alias
        first = alias.choices[0] if isinstance(alias, AliasChoices) else alias
        name = first if isinstance(first, str) else f"THREADLINE_{name.upper()}"
    return name + "".join(f"[{json.dumps(part)}]" for part in rest)


async def drive(
    settings: Settings, agent: AgentSettings, thread_id: str, first: Any, *, auto_approve: bool
) -> int:
    """Run through a server when one answers at ``THREADLINE_URL``, else through the same
    service started in this process."""
    url = os.environ.get("THREADLINE_URL") or f"http://{settings.host}:{settings.port}"
    client = await find_server(url)
    if client is not None:
        try:  # already open (it asked /ok): closed here, not entered again
            print(f"thread {thread_id} · through the server at {url}")
            backend = ServerBackend(client, thread_id)
            return await terminal.drive(backend, thread_id, first, auto_approve=auto_approve)
        finally:
            await client.aclose()
    from api.server import serving_here

    async with serving_here(settings) as (here, mode), terminal.client_for(here) as client:
        print(f"thread {thread_id} · model: {agent.model_label} · in-process, database: {mode}")
        backend = ServerBackend(client, thread_id)
        return await terminal.drive(backend, thread_id, first, auto_approve=auto_approve)


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
    settings, agent = load_settings()
    if args.command == "keys":
        from cli.keys import keys_command

        sys.exit(asyncio.run(keys_command(settings, args)))
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
        sys.exit(
            follow(
                drive(settings, agent, thread_id, first, auto_approve=args.auto_approve), thread_id
            )
        )
    if args.command == "resume":
        sys.exit(
            follow(
                drive(settings, agent, args.thread_id, None, auto_approve=args.auto_approve),
                args.thread_id,
            )
        )


def follow(driving: Any, thread_id: str) -> int:
    """Run the terminal loop; Ctrl-C stops it with a word on how to go on."""
    try:
        code: int = asyncio.run(driving)
    except KeyboardInterrupt:
        print(f"\nstopped. `threadline resume {thread_id}` continues the thread.", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    main()
