"""``select`` of a thread's state and history (the SDKs' ``get_state(select=...)``,
``get_history(select=...)``): only the named fields of each state, and ``values.<key>`` for one
key of its values (several such keys add up)."""

from __future__ import annotations

from typing import Any


def names_value_keys(select: list[str] | None) -> bool:
    """Whether ``select`` asks for single keys of the values (``values.<key>``)."""
    return any(s.startswith("values.") for s in select or ())


def selected(state: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    """``state`` with only the fields ``select`` names (all of it without ``select``)."""
    if not select:
        return state
    keys = [s for s in select if "." not in s]
    out = {k: state[k] for k in dict.fromkeys(keys) if k in state}
    value_keys = [s.split(".", 1)[1] for s in select if s.startswith("values.")]
    if value_keys and "values" not in out:
        values = state.get("values")
        if isinstance(values, dict):
            out["values"] = {k: values[k] for k in dict.fromkeys(value_keys) if k in values}
        else:
            out["values"] = values
    return out
