"""Catalog tasks: instruction, workspace template, acceptance check and an offline plan."""

from agent.tasks.base import Task, find_marker, plan_view
from agent.tasks.catalog import CATALOG, FREEFORM, TaskCatalog, get_task

__all__ = ["CATALOG", "FREEFORM", "Task", "TaskCatalog", "find_marker", "get_task", "plan_view"]
