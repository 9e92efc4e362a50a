"""The built-in agent wired from its settings (``agent.settings``): its model, tools, sandbox,
tasks and policy; the service's settings give it its data directory and config file."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from agent import ApprovalPolicy, build_graph
from agent.models import OfflineChatModel
from agent.policy import validate_rules
from agent.settings import AgentSettings
from agent.tasks import TaskCatalog
from agent.tasks.operator import load_task_dir
from agent.tools import Sandbox, ToolSpec, default_sandbox, default_tools
from agent.tools.command import DEFAULT_ALLOWED_PROGRAMS
from agent.tools.mcp import McpServerStatus, discover_tools
from agent.tools.mcp_config import McpServerConfig, parse_mcp_servers
from api.builtin_agent.adapter import BuiltinAgent
from api.durable.saver import PooledSaver
from api.platform.settings import Settings
from api.project.graphs import GraphConfigError

logger = logging.getLogger(__name__)


def make_model(agent: AgentSettings) -> BaseChatModel:
    """The configured OpenAI-compatible model, else the offline scripted one."""
    if agent.openai_api_key:
        from agent.models.openai_model import openai_chat_model

        return openai_chat_model(
            api_key=agent.openai_api_key.get_secret_value(),
            base_url=agent.openai_base_url,
            model=agent.openai_model,
            timeout=agent.openai_timeout,
            max_retries=agent.openai_max_retries,
            max_tokens=agent.openai_max_tokens,
        )
    return OfflineChatModel()


def agent_sandbox(agent: AgentSettings) -> Sandbox:
    """The sandbox ``THREADLINE_SANDBOX`` asks for (``auto``: the process-wide one)."""
    return default_sandbox() if agent.sandbox == "auto" else Sandbox(agent.sandbox)


async def start_sandbox(agent: AgentSettings) -> Sandbox:
    """Probe the sandbox and say what commands will run in; ``bwrap`` mode fails without one."""
    sandbox = agent_sandbox(agent)
    status = await sandbox.start()
    if status == "bwrap":
        logger.info("sandbox: %s", sandbox.describe())
    elif status == "off":
        logger.warning("sandbox: %s", sandbox.describe())
    else:
        logger.error("sandbox: %s", sandbox.describe())
    return sandbox


def agent_tools(agent: AgentSettings, sandbox: Sandbox | None = None) -> list[ToolSpec]:
    return default_tools(
        allowed_programs=agent.allowed_programs or DEFAULT_ALLOWED_PROGRAMS,
        sandbox=sandbox or agent_sandbox(agent),
    )


def mcp_configs(settings: Settings, agent: AgentSettings) -> dict[str, McpServerConfig]:
    """The external MCP servers: the config file's ``"mcp_servers"``, then the setting's (the
    setting wins for a name in both)."""
    servers: dict[str, Any] = {}
    if settings.config is not None:
        try:
            data = json.loads(settings.config.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise GraphConfigError(f"cannot read {settings.config}: {err}") from None
        if isinstance(data, dict) and data.get("mcp_servers") is not None:
            if not isinstance(data["mcp_servers"], dict):
                raise GraphConfigError(f"{settings.config}: 'mcp_servers' must be an object")
            servers.update(data["mcp_servers"])
    servers.update(agent.mcp_servers)
    try:
        return parse_mcp_servers(servers)
    except ValueError as err:
        raise GraphConfigError(str(err)) from None


async def mcp_servers(
    settings: Settings, agent: AgentSettings, taken: set[str]
) -> list[McpServerStatus]:
    """Each configured server with the tools it listed (or why it has none)."""
    configs = mcp_configs(settings, agent)
    return await discover_tools(configs, taken) if configs else []


def agent_policy(agent: AgentSettings) -> ApprovalPolicy:
    """The deployment's approval policy."""
    return ApprovalPolicy(
        validate_rules(agent.approval_policy), allow_overrides=agent.allow_policy_overrides
    )


def task_catalog(agent: AgentSettings) -> TaskCatalog:
    """The shipped tasks, the operator's (``THREADLINE_TASKS_DIR``), the free-text check."""
    extra = load_task_dir(agent.tasks_dir) if agent.tasks_dir else []
    return TaskCatalog.with_tasks(extra, agent.freeform_check)


def build_agent(
    settings: Settings,
    agent: AgentSettings,
    saver: PooledSaver | None,
    tasks: TaskCatalog | None = None,
    sandbox: Sandbox | None = None,
    extra_tools: Sequence[ToolSpec] = (),
    store: BaseStore | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The built-in agent, wired from its settings; ``extra_tools`` (the MCP servers') after the
    built-in ones."""
    sandbox = sandbox or agent_sandbox(agent)
    return build_graph(
        model=make_model(agent),
        tools=[*agent_tools(agent, sandbox), *extra_tools],
        checkpointer=saver,
        data_dir=settings.data_dir,
        policy=agent_policy(agent),
        limits=agent.limits,
        tasks=tasks or task_catalog(agent),
        sandbox=sandbox,
        store=store,
    )


async def open_agent(
    settings: Settings,
    saver: PooledSaver,
    store: BaseStore | None = None,
    agent: AgentSettings | None = None,
) -> tuple[CompiledStateGraph[Any, Any, Any, Any], BuiltinAgent]:
    """The built-in agent's graph and its adapter, sharing one probed sandbox and catalog, and
    the tools the external MCP servers listed. ``agent``: its settings; unset, they are read from
    the environment, as the service's are (a bad one fails here, with every problem at once;
    ``threadline serve`` checks them before anything starts)."""
    agent = agent or AgentSettings()
    sandbox = await start_sandbox(agent)
    tasks = task_catalog(agent)
    builtin = agent_tools(agent, sandbox)
    servers = await mcp_servers(settings, agent, {t.name for t in builtin})
    remote = [t for server in servers for t in server.tools]
    adapter = BuiltinAgent(
        settings=agent,
        data_dir=settings.data_dir,
        tools={t.name: t for t in [*builtin, *remote]},
        tasks=tasks,
        policy=agent_policy(agent),
        sandbox=sandbox,
        mcp_servers=servers,
    )
    graph = build_agent(
        settings, agent, saver, tasks, sandbox=sandbox, extra_tools=remote, store=store
    )
    return graph, adapter
