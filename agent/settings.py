"""The built-in agent's settings: its model, tools, sandbox, tasks, approval policy and budgets,
read from the environment like the service's own (``api.platform.settings``), and failing fast the
same way: every problem at once, each naming its variable.

The service reads them where it opens the agent (``api.builtin_agent.wiring.open_agent``); the
``threadline`` command reads them beside its own settings, so one message lists the problems of
both before anything starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.limits import Limits
from agent.models.offline import OFFLINE_MODEL_NAME
from agent.policy import validate_rules
from agent.tools.mcp_config import parse_mcp_servers

OBJECTS = ("approval_policy", "mcp_servers")
"""The settings given as a JSON object."""
LISTS = ("freeform_check", "allowed_programs")
"""The settings given as a list: a JSON array or comma-separated items."""


class AgentSettings(BaseSettings):
    """The built-in agent's configuration; environment variables are ``THREADLINE_<FIELD>``
    unless noted (the model's are ``OPENAI_*``, as the OpenAI clients name them)."""

    # Lists and JSON objects are parsed by ``values_from_text`` instead of pydantic-settings, whose
    # JSON decoding fails outside validation (one SettingsError, the other problems unreported).
    model_config = SettingsConfigDict(
        env_prefix="THREADLINE_", extra="ignore", enable_decoding=False
    )

    openai_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("OPENAI_API_KEY", "THREADLINE_OPENAI_API_KEY")
    )
    """Set to use an OpenAI-compatible model; unset: the offline scripted model."""
    openai_base_url: str | None = Field(
        None, validation_alias=AliasChoices("OPENAI_BASE_URL", "THREADLINE_OPENAI_BASE_URL")
    )
    """An OpenAI-compatible endpoint (vLLM, Ollama, ...); unset: OpenAI itself."""
    openai_model: str = Field(
        "gpt-4o-mini", validation_alias=AliasChoices("OPENAI_MODEL", "THREADLINE_OPENAI_MODEL")
    )
    openai_timeout: float = Field(
        120.0,
        gt=0,
        le=3600,
        validation_alias=AliasChoices("OPENAI_TIMEOUT", "THREADLINE_OPENAI_TIMEOUT"),
    )
    """Seconds a model request may wait for the endpoint (to connect, and between two streamed
    chunks) before it fails; the run then ends in error naming the endpoint and this setting."""
    openai_max_retries: int = Field(
        2,
        ge=0,
        le=10,
        validation_alias=AliasChoices("OPENAI_MAX_RETRIES", "THREADLINE_OPENAI_MAX_RETRIES"),
    )
    """Retries of a model request that timed out, could not connect or got 408/409/429/5xx."""
    openai_max_tokens: int | None = Field(
        None,
        ge=1,
        validation_alias=AliasChoices("OPENAI_MAX_TOKENS", "THREADLINE_OPENAI_MAX_TOKENS"),
    )
    """Most tokens one model answer may have (``max_tokens``); unset: the server's own limit. A
    small local model can otherwise write until its context is full."""

    approval_policy: dict[str, str] = Field(default_factory=dict)
    """Deployment rules, JSON: ``{"run_command": "deny", "*": "ask"}``."""
    allow_policy_overrides: bool = False
    """Let a run's ``config.configurable.approval_policy`` loosen the server's rules (it can
    always tighten them). Off: a loosening run gets 403."""
    tasks_dir: Path | None = None
    """A directory of the operator's own task files (``agent.tasks.operator``), one JSON each."""
    freeform_check: list[str] | None = None
    """Acceptance check of free-text runs, a list (program and arguments); unset: none."""
    allowed_programs: list[str] | None = None
    """Programs ``run_command`` may start (a list); unset: the built-in allow-list."""
    sandbox: Literal["auto", "bwrap", "off"] = "auto"
    """How commands (``run_command``, acceptance checks) are confined (``agent.tools.sandbox``).
    ``auto``: bubblewrap when it can start, else commands are refused with how to enable it;
    ``bwrap``: the same, but start-up fails without it; ``off``: unconfined (logged as a
    warning)."""
    mcp_servers: dict[str, Any] = Field(default_factory=dict)
    """External MCP servers whose tools join the built-in agent's, JSON (``agent.tools.
    mcp_config``): ``{"git": {"command": "python", "args": ["-m", "mcp_server_git",
    "--repository", "{workspace}"]}}``; a config file's ``"mcp_servers"`` adds to them."""

    max_steps: int = Field(20, ge=1)
    max_tokens: int = Field(200_000, ge=1)
    max_seconds: float = Field(600.0, gt=0)
    max_verify_attempts: int = Field(2, ge=1)
    tool_concurrency: int = Field(4, ge=1, le=64)
    """Read-only tool calls of one agent step that run at once per thread; calls that write run
    one at a time, in the order the model gave them."""
    context_budget: int | None = Field(None, ge=256)
    """Tokens one model call may send (system prompt, messages, tool schemas, estimated);
    above 80% of it older turns are compacted into a summary (``agent.context``). Unset: the
    model's known window minus room for its reply (32,000 for an unknown model)."""

    @field_validator(*OBJECTS, *LISTS, mode="before")
    @classmethod
    def values_from_text(cls, value: Any, info: ValidationInfo) -> Any:
        """A list setting is a JSON array or comma-separated items; an object setting is a JSON
        object; an empty or blank value of either means its default."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            raise PydanticUseDefault()
        return _object_from_text(value) if info.field_name in OBJECTS else _list_from_text(value)

    @field_validator("approval_policy")
    @classmethod
    def approval_rules_are_known(cls, value: dict[str, str]) -> dict[str, str]:
        return dict(validate_rules(value))

    @field_validator("mcp_servers")
    @classmethod
    def mcp_servers_are_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        parse_mcp_servers(value)
        return value

    @field_validator("openai_base_url")
    @classmethod
    def empty_base_url_is_unset(cls, value: str | None) -> str | None:
        # OPENAI_BASE_URL="" (docker-compose passes it through empty) means OpenAI itself.
        return value or None

    @model_validator(mode="after")
    def base_url_needs_a_key(self) -> AgentSettings:
        if self.openai_base_url and not self.openai_api_key:
            raise ValueError(
                "OPENAI_BASE_URL is set but OPENAI_API_KEY is not: set OPENAI_API_KEY too "
                "(any non-empty value for servers that ignore it)"
            )
        return self

    @property
    def limits(self) -> Limits:
        return Limits(
            max_steps=self.max_steps,
            max_tokens=self.max_tokens,
            max_seconds=self.max_seconds,
            max_verify_attempts=self.max_verify_attempts,
            tool_concurrency=self.tool_concurrency,
            context_budget=self.context_budget,
        )

    @property
    def model_label(self) -> str:
        """What ``/info`` and the CLI say the model is."""
        if self.openai_api_key:
            return f"openai:{self.openai_model}" + (
                f" at {self.openai_base_url}" if self.openai_base_url else ""
            )
        return OFFLINE_MODEL_NAME


def _list_from_text(text: str) -> Any:
    # The service's settings parse their lists the same way (``api.platform.settings``), which
    # this package may not import.
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except ValueError as err:
            raise ValueError(
                f"not a valid JSON array ({err}): give a JSON array or comma-separated values"
            ) from None
    return [item.strip() for item in text.split(",") if item.strip()]


def _object_from_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as err:
        raise ValueError(f"not valid JSON ({err}): give a JSON object") from None
