"""The long-lived parts a process needs to run graphs: database, pool, checkpointer, graphs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel

from agent import ApprovalPolicy, build_graph
from agent.models import OfflineChatModel
from agent.policy import validate_rules
from agent.tasks import TaskCatalog
from agent.tasks.operator import load_task_dir
from agent.tools import Sandbox, ToolSpec, default_sandbox, default_tools
from agent.tools.command import DEFAULT_ALLOWED_PROGRAMS
from api.database import Database, Pool, PooledSaver, open_pool, prepare_schema, resolve_database
from api.settings import Settings

logger = logging.getLogger(__name__)

BUILTIN_ASSISTANT = "agent"


def make_model(settings: Settings) -> BaseChatModel:
    """The configured OpenAI-compatible model, else the offline scripted one."""
    if settings.openai_api_key:
        from agent.models.openai_model import openai_chat_model

        return openai_chat_model(
            api_key=settings.openai_api_key.get_secret_value(),
            base_url=settings.openai_base_url,
            model=settings.openai_model,
        )
    return OfflineChatModel()


def saver_concurrency(pool_max_size: int) -> int:
    """Connections the checkpointer may hold at once: the pool less a share for queue and events."""
    return max(1, pool_max_size - max(2, pool_max_size // 4))


@dataclass
class Runtime:
    """What the lifespan (or the CLI) opens once and hands to everything else."""

    settings: Settings
    database: Database
    pool: Pool
    saver: PooledSaver
    graphs: dict[str, Pregel] = field(default_factory=dict)
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    """The built-in agent's tools by name (approval edits are validated against them)."""
    tasks: TaskCatalog = field(default_factory=TaskCatalog)
    """The built-in agent's tasks (input is checked against them)."""
    policy: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    """The deployment's approval policy (a run's rules are checked against it)."""
    sandbox: Sandbox = field(default_factory=default_sandbox)
    """What commands run confined by; probed at start-up (``/info`` shows its status)."""


def agent_sandbox(settings: Settings) -> Sandbox:
    """The sandbox ``THREADLINE_SANDBOX`` asks for (``auto``: the process-wide one)."""
    return default_sandbox() if settings.sandbox == "auto" else Sandbox(settings.sandbox)


async def start_sandbox(settings: Settings) -> Sandbox:
    """Probe the sandbox and say what commands will run in; ``bwrap`` mode fails without one."""
    sandbox = agent_sandbox(settings)
    status = await sandbox.start()
    if status == "bwrap":
        logger.info("sandbox: %s", sandbox.describe())
    elif status == "off":
        logger.warning("sandbox: %s", sandbox.describe())
    else:
        logger.error("sandbox: %s", sandbox.describe())
    return sandbox


def agent_tools(settings: Settings, sandbox: Sandbox | None = None) -> list[ToolSpec]:
    return default_tools(
        allowed_programs=settings.allowed_programs or DEFAULT_ALLOWED_PROGRAMS,
        sandbox=sandbox or agent_sandbox(settings),
    )


def agent_policy(settings: Settings) -> ApprovalPolicy:
    """The deployment's approval policy."""
    return ApprovalPolicy(
        validate_rules(settings.approval_policy),
        allow_overrides=settings.allow_policy_overrides,
    )


def task_catalog(settings: Settings) -> TaskCatalog:
    """The shipped tasks, the operator's (``THREADLINE_TASKS_DIR``), the free-text check."""
    extra = load_task_dir(settings.tasks_dir) if settings.tasks_dir else []
    return TaskCatalog.with_tasks(extra, settings.freeform_check)


def build_agent(
    settings: Settings,
    saver: PooledSaver | None,
    tasks: TaskCatalog | None = None,
    sandbox: Sandbox | None = None,
) -> CompiledStateGraph:
    """The built-in agent, wired from settings."""
    sandbox = sandbox or agent_sandbox(settings)
    return build_graph(
        model=make_model(settings),
        tools=agent_tools(settings, sandbox),
        checkpointer=saver,
        data_dir=settings.data_dir,
        policy=agent_policy(settings),
        limits=settings.limits,
        tasks=tasks or task_catalog(settings),
        sandbox=sandbox,
    )


@asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Start or connect to PostgreSQL, migrate, set up the saver, build the built-in graph."""
    sandbox = await start_sandbox(settings)
    database = await resolve_database(settings.database_url, settings.data_dir)
    logger.info("database: %s", database.mode)
    async with open_pool(database.url, max_size=settings.pool_max_size) as pool:
        saver = PooledSaver(pool, concurrency=saver_concurrency(settings.pool_max_size))
        await prepare_schema(pool, saver)
        runtime = Runtime(
            settings=settings, database=database, pool=pool, saver=saver, sandbox=sandbox
        )
        runtime.tasks = task_catalog(settings)
        runtime.policy = agent_policy(settings)
        runtime.graphs[BUILTIN_ASSISTANT] = build_agent(
            settings, saver, runtime.tasks, sandbox=sandbox
        )
        runtime.tools = {t.name: t for t in agent_tools(settings, sandbox)}
        yield runtime
