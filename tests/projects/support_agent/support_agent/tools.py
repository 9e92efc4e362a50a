"""The agent's tools. Each one that runs appends a line to the ledger file named by
``SUPPORT_AGENT_LEDGER`` (when set), so a test can count what ran."""

from __future__ import annotations

import os
import time

from langchain.tools import ToolRuntime, tool

from support_agent.context import Context

ORDERS = {"A1": {"item": "kettle", "total": 20.0}, "B2": {"item": "toaster", "total": 35.0}}


def record(line: str) -> None:
    ledger = os.environ.get("SUPPORT_AGENT_LEDGER")
    if ledger:
        with open(ledger, "a", encoding="utf-8") as file:
            file.write(line + "\n")


@tool
def lookup_order(order_id: str, runtime: ToolRuntime[Context]) -> str:
    """Look up an order by its id."""
    user = runtime.context.user_id
    record(f"lookup-start {order_id} {user}")
    # A slow backend, when asked to be one: a test stops the server in the middle of this call.
    time.sleep(float(os.environ.get("SUPPORT_AGENT_LOOKUP_DELAY") or 0))
    order = ORDERS.get(order_id)
    record(f"lookup-done {order_id} {user}")
    if order is None:
        return f"No order {order_id} for user {user}."
    return (
        f"Order {order_id} for user {user} ({runtime.context.tier} tier): "
        f"{order['item']}, total {order['total']:.2f}."
    )


@tool
def refund(order_id: str, amount: float, runtime: ToolRuntime[Context]) -> str:
    """Refund ``amount`` on an order. Needs a human's approval."""
    record(f"refund {order_id} {amount:.2f} {runtime.context.user_id}")
    return f"Refunded {amount:.2f} on order {order_id}."
