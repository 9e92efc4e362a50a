"""Settings: one class, read from the environment, that fails fast with every problem at once.

The service's own; the built-in agent's (its model, tools, policy, budgets) are the agent's
(``agent.settings``), read where the agent is opened (``api.builtin_agent.wiring``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import platformdirs
from pydantic import (
    AliasChoices,
    Field,
    IPvAnyNetwork,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    return platformdirs.user_data_path("threadline")


class Settings(BaseSettings):
    """threadline's configuration; environment variables are ``THREADLINE_<FIELD>`` unless noted.

    A list is a JSON array or comma-separated items (``values_from_text``).
    """

    # Lists are parsed by ``values_from_text`` instead of pydantic-settings, whose
    # JSON decoding fails outside validation (one SettingsError, the other problems unreported).
    model_config = SettingsConfigDict(
        env_prefix="THREADLINE_", extra="ignore", enable_decoding=False
    )

    database_url: str | None = Field(
        None, validation_alias=AliasChoices("DATABASE_URL", "THREADLINE_DATABASE_URL")
    )
    """PostgreSQL to use (``DATABASE_URL``); unset: an embedded server in ``data_dir``."""
    data_dir: Path = Field(default_factory=_default_data_dir)
    """Embedded database, workspaces (``<data_dir>/workspaces/<thread_id>``)."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    config: Path | None = None
    """A ``langgraph.json``-style file of extra graphs to serve (``THREADLINE_CONFIG``)."""

    pool_max_size: int = Field(20, ge=2, le=500)
    """Database connections per process (checkpoints, queue, event log, listeners)."""
    pool_min_size: int = Field(10, ge=1, le=500)
    """Connections the pool opens in the background once the server is up and keeps open (at
    most ``pool_max_size``); it grows to ``pool_max_size`` on demand, one connection at a time,
    which a burst of runs on a cold pool would otherwise wait for."""
    workers: int = Field(16, ge=1, le=1000)
    """Runs executed at once by this process."""
    lease_seconds: float = Field(10.0, gt=0)
    """A run whose worker stopped renewing for this long is taken over by another worker."""
    heartbeat_seconds: float = Field(2.0, gt=0)
    poll_seconds: float = Field(1.0, gt=0)
    """How often idle workers look for runs when no notification wakes them, and each process's
    webhook delivery for webhooks due (``api.engine.webhooks``)."""
    cron_poll_seconds: float = Field(1.0, gt=0, le=60)
    """How often each process's scheduler looks for due schedules (``api.runs.scheduler``)."""
    cron_min_interval_seconds: float = Field(60.0, ge=1)
    """The shortest time between two due times of one schedule; below 60, 6-field expressions
    (seconds first) are accepted."""
    max_attempts: int = Field(3, ge=1, le=100)
    """Attempts in a row that save no new checkpoint (their process died or their lease ran out
    each time) before a run ends in error; an attempt that saved one starts the count again."""
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    """On SIGTERM, how long running runs get to reach a checkpoint before they are handed back."""
    threadless_grace_seconds: float = Field(30.0, ge=0)
    """How long the thread of a finished threadless run (``on_completion: delete``) stays, for
    clients still reading its stream or values, before it is removed (``api.engine.ephemeral``)."""
    ttl_sweep_seconds: float | None = Field(None, gt=0)
    """How often each process sweeps threads past their time-to-live (``api.runs.thread_ttl``);
    unset: the config's ``checkpointer.ttl.sweep_interval_minutes`` (default 5 minutes)."""
    max_body_bytes: int = Field(1_048_576, ge=1024)
    """Largest request body accepted (413 above it)."""
    sse_send_timeout_seconds: float = Field(30.0, gt=0, le=3600)
    """Seconds an SSE stream waits for its client to accept data (an event, a heartbeat, the end
    of the stream) before it drops the connection, with what the server buffered for it
    (``api.http.sse``). The run goes on (unless the client asked for ``on_disconnect: cancel``), and
    the client resumes with ``Last-Event-ID``. A client that stopped reading would otherwise hold
    its connection and buffers forever."""
    max_streams_per_client: int = Field(256, ge=0)
    """SSE streams one client may hold open at once on this process: the authenticated identity,
    or without authentication the address it connects from; more get 429 with ``Retry-After``
    (``api.http.stream_limits``). ``0``: no limit. 256 is above the most one legitimate client is
    known to hold (the benchmark follows 200 runs from one process; a backend may stream for
    many users under one key) and a quarter of the common 1024 open-files limit."""
    checkpoint_retention: Literal["all", "latest"] = "all"
    """``all``: every step's checkpoint stays (history, time travel), as in LangGraph's server.
    ``latest``: when a run ends ``success``, only the thread's latest checkpoint is kept, with a
    full snapshot of its messages (``api.durable.compaction``); the history then starts there."""
    delta_cache_items: int = Field(200_000, ge=0)
    """List items (messages) of ``DeltaChannel`` values this process keeps in memory at their
    threads' latest checkpoints after a run, so the next run or state read of a long
    conversation does not rebuild them from storage (``api.durable.delta_cache``); the threads
    used longest ago are dropped first. ``0``: keep none."""

    webhook_allow_private: bool = False
    """Let run webhooks call loopback (``localhost``, 127.0.0.0/8, ::1) and private networks
    (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7); refused (422) otherwise
    (``api.contract.webhook_url``). LangGraph's
    ``webhooks.url.disable_loopback``/``disable_private_ips``."""
    webhook_allowed_networks: list[IPvAnyNetwork] = Field(default_factory=list)
    """Addresses or CIDRs (a list) webhooks may call whatever their kind (``10.1.2.0/24``)."""
    webhook_allowed_domains: list[str] = Field(default_factory=list)
    """When set, the only hosts webhooks may name (a list; ``*.example.com``: its subdomains),
    as LangGraph's ``webhooks.url.allowed_domains``; their addresses are checked all the same."""
    webhook_timeout_seconds: float = Field(30.0, gt=0, le=600)
    """Seconds one webhook delivery (connecting, redirects, the answer's status) may take."""
    webhook_max_attempts: int = Field(5, ge=1, le=100)
    """Deliveries of a webhook tried (after connection errors, timeouts, 429 and 5xx; 1 s, 2 s,
    4 s... apart, at most 5 min) before it is marked failed (``api.engine.webhooks``)."""

    auth: Literal["none", "keys"] = "none"
    """``keys``: built-in API keys (``threadline keys create``); ``none``: no authentication, and
    the server binds loopback only. A ``langgraph.json`` with ``"auth"`` overrides both."""
    insecure_no_auth: bool = False
    """Let a server without authentication bind a non-loopback address (logged, in ``/info``)."""
    allowed_hosts: list[str] = Field(default_factory=lambda: ["localhost", "127.0.0.1", "::1"])
    """``Host`` names the server answers to (against DNS rebinding); ``["*"]`` or ``*``: any."""
    cors_origins: list[str] = Field(default_factory=list)
    """Browser origins besides the page's own that may call the API (CORS), a list."""
    review_permission: str = "threadline:review"
    """A permission that lets an identity read and approve threads it does not own."""
    approve_permission: str | None = None
    """When set, answering approvals needs this permission, owners included."""

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    """``json``: every log line of ``threadline serve`` is a JSON object (timestamp, level,
    logger, message, and ``run_id``/``thread_id``/``attempt`` on lines about a run); ``text``:
    plain lines, with the run's fields appended (``api.platform.logs``)."""

    @field_validator("*", mode="before")
    @classmethod
    def values_from_text(cls, value: Any, info: ValidationInfo) -> Any:
        """A list setting is a JSON array or comma-separated items; an empty or blank value
        means its default."""
        if not isinstance(value, str) or info.field_name is None:
            return value
        if not _is_list(cls.model_fields[info.field_name].annotation):
            return value
        if not value.strip():
            raise PydanticUseDefault()
        return _list_from_text(value)

    @field_validator("database_url")
    @classmethod
    def database_url_is_postgres(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("DATABASE_URL must start with postgresql:// (PostgreSQL is required)")
        return value or None

    @model_validator(mode="after")
    def heartbeat_within_lease(self) -> Settings:
        if self.heartbeat_seconds * 2 > self.lease_seconds:
            raise ValueError(
                "THREADLINE_HEARTBEAT_SECONDS must be at most half of THREADLINE_LEASE_SECONDS, "
                "or live runs would be taken over"
            )
        return self


def _is_list(annotation: Any) -> bool:
    """Whether a field holds a list (or None)."""
    return any(
        (get_origin(candidate) or candidate) is list
        for candidate in (annotation, *get_args(annotation))
    )


def _list_from_text(text: str) -> Any:
    # The built-in agent's settings parse their lists the same way (``agent.settings``), which
    # this package may not import.
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except ValueError as err:
            raise ValueError(
                f"not a valid JSON array ({err}): give a JSON array or comma-separated values"
            ) from None
    return [item.strip() for item in text.split(",") if item.strip()]
