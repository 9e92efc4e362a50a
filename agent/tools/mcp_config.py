"""The operator's external MCP servers: what ``THREADLINE_MCP_SERVERS`` (or a config file's
``"mcp_servers"``) may say, checked with an error that names the server and the field.

``{"git": {"command": "python", "args": ["-m", "mcp_server_git", "--repository", "{workspace}"],
"discovery_args": ["-m", "mcp_server_git"]}, "docs": {"url": "https://…/mcp", "headers": {…},
"trusted": true}}``. In a stdio server's ``args``, ``env`` values and ``cwd``, ``{workspace}`` is
the calling thread's workspace; the process starts in that workspace unless ``cwd`` says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STDIO_KEYS = {"command", "args", "env", "cwd", "discovery_args", "trusted", "timeout"}
HTTP_KEYS = {"url", "headers", "trusted", "timeout"}
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
WORKSPACE = "{workspace}"


@dataclass(frozen=True)
class McpServerConfig:
    """One external server: stdio (``command``) or Streamable HTTP (``url``)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = WORKSPACE
    discovery_args: tuple[str, ...] | None = None
    """Arguments for the start-up listing of tools (no thread, so no workspace); unset: ``args``
    with ``{workspace}`` an empty scratch directory."""
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    trusted: bool = False
    """Trusted: the server's ``readOnlyHint`` decides whether a tool is read-only (read-only
    tools run without asking). Untrusted: every tool of the server asks by default."""
    timeout: float = 30.0
    """Seconds for starting the server and for one call (a slower one fails the call)."""

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


def _strings(name: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"MCP server {name!r}: {key!r} must be a list of strings")
    return tuple(value)


def _string_map(name: str, key: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"MCP server {name!r}: {key!r} must be an object of strings")
    return dict(value)


def parse_server(name: str, raw: object) -> McpServerConfig:
    """One server's entry, checked."""
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ValueError(
            f"MCP server name {name!r} must be 1-32 letters, digits, '_' or '-' "
            "(it prefixes the names of the server's tools)"
        )
    if not isinstance(raw, Mapping):
        raise ValueError(f"MCP server {name!r} must be an object with 'command' or 'url'")
    has_command, has_url = "command" in raw, "url" in raw
    if has_command == has_url:
        raise ValueError(f"MCP server {name!r} needs exactly one of 'command' (stdio) or 'url'")
    allowed = STDIO_KEYS if has_command else HTTP_KEYS
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValueError(
            f"MCP server {name!r} has unknown keys {unknown}; allowed: {sorted(allowed)}"
        )
    trusted = raw.get("trusted", False)
    if not isinstance(trusted, bool):
        raise ValueError(f"MCP server {name!r}: 'trusted' must be true or false")
    timeout = raw.get("timeout", 30.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"MCP server {name!r}: 'timeout' must be a positive number of seconds")
    common: dict[str, Any] = {"name": name, "trusted": trusted, "timeout": float(timeout)}
    if has_url:
        url = raw["url"]
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server {name!r}: 'url' must be an http:// or https:// URL")
        headers = _string_map(name, "headers", raw.get("headers", {}))
        return McpServerConfig(url=url, headers=headers, **common)
    command = raw["command"]
    if not isinstance(command, str) or not command:
        raise ValueError(f"MCP server {name!r}: 'command' must be a non-empty string")
    cwd = raw.get("cwd", WORKSPACE)
    if not isinstance(cwd, str) or not cwd:
        raise ValueError(f"MCP server {name!r}: 'cwd' must be a non-empty string")
    discovery = raw.get("discovery_args")
    return McpServerConfig(
        command=command,
        args=_strings(name, "args", raw.get("args", [])),
        env=_string_map(name, "env", raw.get("env", {})),
        cwd=cwd,
        discovery_args=None if discovery is None else _strings(name, "discovery_args", discovery),
        **common,
    )


def parse_mcp_servers(raw: object) -> dict[str, McpServerConfig]:
    """Every server of the setting, checked; ValueError says which entry is wrong and why."""
    if not isinstance(raw, Mapping):
        raise ValueError("mcp_servers must be a JSON object mapping server names to servers")
    return {name: parse_server(name, entry) for name, entry in raw.items()}


def with_workspace(text: str, workspace: str) -> str:
    return text.replace(WORKSPACE, workspace)
