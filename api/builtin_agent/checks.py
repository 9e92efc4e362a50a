"""What the service checks before it queues a run of the built-in agent (``assistant_id`` agent).

Clients send data, never programs or policy: the input names a catalog task and its declared
parameters (or brings messages); a command cannot write the agent's control fields or jump into
its ``tools`` or ``verify`` nodes; a run's approval rules may only tighten the server's. Graphs
served from ``langgraph.json`` keep LangGraph's semantics and are not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agent.policy import ApprovalPolicy, Decision, validate_rules
from agent.tasks import TaskCatalog
from agent.tasks.catalog import chat_task
from agent.tools import ToolSpec
from agent.tools.base import describe_validation_error
from api.platform.errors import Forbidden, Invalid

INPUT_KEYS = ("messages", "task", "call")
CALL_KEYS = ("name", "args", "id")
CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
TASK_KEYS = ("name", "params")
UPDATE_KEYS = ("messages",)
"""What ``command.update`` may write: the conversation, not the control fields (task, status,
step, usage, verdict, verify attempts), which only the agent's own nodes write."""
GOTO_NODES = ("agent",)
"""Where ``command.goto`` may send the agent: ``tools`` and ``verify`` run only what it decided."""


def check_input(value: Any, tasks: TaskCatalog) -> str | None:
    """The built-in agent's input: a catalog task with valid params, or messages (422 otherwise).

    Returns the task's name when the input starts one. Checked here so a typo is a 422 at once
    instead of a run that fails in its first step.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or not (set(INPUT_KEYS) & value.keys()):
        raise Invalid(
            'The agent\'s input is {"task": {"name": ..., "params": {...}}} (GET /tasks lists '
            'them), {"messages": [{"role": "user", "content": "..."}]}, {"call": {"name": ..., '
            '"args": {...}}} (one tool call without the model), or null to resume.'
        )
    extra = sorted(set(value) - set(INPUT_KEYS))
    if extra:
        raise Invalid(
            f"input has field(s) {extra} the agent does not take: its input has only "
            f"{', '.join(INPUT_KEYS)}. The agent's state is its own."
        )
    if "call" in value:
        if len(value) > 1:
            raise Invalid('input.call goes alone: one tool call, without "messages" or "task"')
        return None  # checked against the tools (check_call)
    task = value.get("task")
    if task is None:
        return _chat_task(value.get("messages"), tasks)
    if not isinstance(task, dict) or not isinstance(task.get("name"), str):
        raise Invalid('input.task needs a "name" (GET /tasks lists them) and "params"')
    extra = sorted(set(task) - set(TASK_KEYS))
    if extra:
        raise Invalid(
            f"input.task has field(s) {extra}: a task is named, not defined, by a run. Send only "
            f"{' and '.join(TASK_KEYS)}; the instruction, workspace, check and approval rules "
            "come from the server's task catalog (GET /tasks)."
        )
    try:
        tasks.get(task["name"]).parse_params(task.get("params"))
    except KeyError as err:
        raise Invalid(str(err.args[0])) from None
    except ValueError as err:
        raise Invalid(str(err)) from None
    return str(task["name"])


def check_call(value: Any, tools: Mapping[str, ToolSpec]) -> None:
    """``{"call": {"name", "args", "id"?}}``: a known tool and arguments valid for it (422)."""
    call = value.get("call") if isinstance(value, dict) else None
    if call is None:
        return
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise Invalid('input.call is {"name": <a tool>, "args": {...}, "id"?: "..."}')
    extra = sorted(set(call) - set(CALL_KEYS))
    if extra:
        raise Invalid(f"input.call has field(s) {extra}; it takes only {', '.join(CALL_KEYS)}")
    tool = tools.get(call["name"])
    if tool is None:
        raise Invalid(f"input.call: no tool {call['name']!r}. Tools: {', '.join(tools)}.")
    if "id" in call and not (isinstance(call["id"], str) and CALL_ID.fullmatch(call["id"])):
        raise Invalid("input.call.id is 1 to 64 letters, digits, '_' or '-'")
    try:
        tool.validate_args(call.get("args") or {})
    except ValidationError as err:
        raise Invalid(f"input.call: {describe_validation_error(tool, err)}") from None


def _chat_task(messages: Any, tasks: TaskCatalog) -> str | None:
    """A last message ``/task NAME {params}`` starts that task: checked as a task input is."""
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, dict) else last
    if isinstance(content, list):  # content blocks, as agent-chat-ui sends them
        content = "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    if not isinstance(content, str):
        return None
    try:
        named = chat_task(content)
        if named is None:
            return None
        tasks.get(named[0]).parse_params(named[1])
    except KeyError as err:
        raise Invalid(f"/task: {err.args[0]}") from None
    except ValueError as err:
        raise Invalid(
            f"/task {content.split()[1] if len(content.split()) > 1 else ''}: {err}"
        ) from None
    return named[0]


def check_command(command: Mapping[str, Any] | None) -> None:
    """``command.update`` writes only messages; ``command.goto`` goes only to ``agent``."""
    if not command:
        return
    update = command.get("update")
    if update is not None:
        if not isinstance(update, dict):
            raise Invalid(
                "command.update for the agent is an object, such as "
                '{"messages": [{"role": "user", "content": "..."}]}'
            )
        extra = sorted(set(update) - set(UPDATE_KEYS))
        if extra:
            raise Invalid(
                f"command.update cannot write {extra}: the agent's control fields are written "
                f"by its own nodes. It may update only {', '.join(UPDATE_KEYS)}."
            )
    goto = command.get("goto")
    targets = goto if isinstance(goto, list) else [goto] if goto else []
    bad = [t for t in targets if t not in GOTO_NODES]
    if bad:
        raise Invalid(
            f"command.goto cannot send the agent to {bad}: its tools and its acceptance check "
            f"run only what the agent decided. Allowed: {', '.join(GOTO_NODES)}, or leave goto "
            "out."
        )


STATE_NODES = ("agent",)
"""What ``POST /threads/{id}/state`` may write the agent's messages as: the agent itself, so what
runs next follows the agent's own routing, which puts every tool call through the policy."""


def check_state_update(values: Any, as_node: str | None) -> str:
    """A state update writes only messages (as ``command.update`` does), as the ``agent``."""
    if not isinstance(values, dict) or not values:
        raise Invalid(
            'values for the agent is an object with only "messages", such as '
            '{"messages": [{"role": "user", "content": "..."}]}'
        )
    extra = sorted(set(values) - set(UPDATE_KEYS))
    if extra:
        raise Invalid(
            f"values cannot write {extra}: the agent's control fields are written by its own "
            f"nodes. A state update may write only {', '.join(UPDATE_KEYS)}."
        )
    if as_node is not None and as_node not in STATE_NODES:
        raise Invalid(
            f"as_node {as_node!r} is not allowed for the agent: its tools and its acceptance "
            f"check run only what the agent decided. Use {', '.join(STATE_NODES)} or leave "
            "as_node out."
        )
    return STATE_NODES[0]


def check_run_policy(
    config: Mapping[str, Any] | None,
    *,
    policy: ApprovalPolicy,
    tools: Mapping[str, ToolSpec],
    task_rules: Mapping[str, Decision],
) -> None:
    """``config.configurable.approval_policy`` may tighten the server's rules, never loosen
    them (403 naming each loosened tool), unless the operator allows overrides."""
    configurable = (config or {}).get("configurable") or {}
    raw = configurable.get("approval_policy") if isinstance(configurable, dict) else None
    if raw is None:
        return
    try:
        rules = validate_rules(raw)
    except ValueError as err:
        raise Invalid(f"config.configurable.{err}") from None
    loose = policy.loosenings(rules, ((t.name, t.read_only) for t in tools.values()), task_rules)
    if loose:
        what = ", ".join(f"{x.tool}: {x.requested} (server: {x.server_rule})" for x in loose)
        raise Forbidden(
            f"approval_policy may only tighten the server's rules (auto -> ask -> deny), and "
            f"this run's would loosen {what}. Send stricter rules or none; the operator "
            "decides the policy (THREADLINE_APPROVAL_POLICY, or "
            "THREADLINE_ALLOW_POLICY_OVERRIDES=true to let runs loosen it). GET /info shows "
            "the effective policy."
        )


def task_rules_for(tasks: TaskCatalog, run_input: Any, values: Any) -> dict[str, Decision]:
    """The task rules a run's calls will be decided under: the task its input starts (free text
    has none), else the thread's current task (from its last known values)."""
    name: Any = None
    if isinstance(run_input, dict):
        task = run_input.get("task")
        name = task.get("name") if isinstance(task, dict) else None
    elif isinstance(values, dict) and isinstance(values.get("task"), dict):
        name = values["task"].get("name")
    return validate_rules(tasks.policy_for({"name": name} if name else None))
