"""The agent's tool, as the memory-agent template defines it."""

from __future__ import annotations

import uuid
from typing import Annotated

from langchain_core.tools import InjectedToolArg
from langgraph.store.base import BaseStore


async def upsert_memory(
    content: str,
    context: str,
    *,
    memory_id: uuid.UUID | None = None,
    # Hidden from the model.
    user_id: Annotated[str, InjectedToolArg],
    store: Annotated[BaseStore, InjectedToolArg],
) -> str:
    """Upsert a memory in the database.

    If a memory conflicts with an existing one, UPDATE it by passing its memory_id.

    Args:
        content: The main content of the memory, e.g. "User likes hiking."
        context: Additional context, e.g. "Said while planning a trip."
        memory_id: ONLY PROVIDE IF UPDATING AN EXISTING MEMORY.
    """
    mem_id = memory_id or uuid.uuid4()
    await store.aput(
        ("memories", user_id),
        key=str(mem_id),
        value={"content": content, "context": context},
    )
    return f"Stored memory {mem_id}"
