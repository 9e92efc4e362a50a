"""What settings need of the agent to fail fast: rule validation, budgets, the offline model."""

from __future__ import annotations

from agent.limits import Limits
from agent.models.offline import OFFLINE_MODEL_NAME
from agent.policy import validate_rules

__all__ = ["OFFLINE_MODEL_NAME", "Limits", "validate_rules"]
