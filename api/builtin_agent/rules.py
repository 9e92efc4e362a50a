"""What settings need of the agent to fail fast: rule validation, budgets, the offline model,
the external MCP servers' configuration."""

from __future__ import annotations

from agent.limits import Limits
from agent.models.offline import OFFLINE_MODEL_NAME
from agent.policy import validate_rules
from agent.tools.mcp_config import parse_mcp_servers

__all__ = ["OFFLINE_MODEL_NAME", "Limits", "parse_mcp_servers", "validate_rules"]
