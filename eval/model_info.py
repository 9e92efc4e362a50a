"""The model an evaluation ran on, for its result and report: name, endpoint kind, settings.

- **name**: ``OPENAI_MODEL`` (or the offline model's name);
- **endpoint**: ``offline`` (the built-in scripted model), ``openai`` (api.openai.com) or
  ``openai-compatible at HOST:PORT`` (vLLM, Ollama, llama.cpp, ...);
- **settings**: the sampling temperature (the agent's, fixed), the request timeout, retries and
  answer cap (``OPENAI_TIMEOUT``, ``OPENAI_MAX_RETRIES``, ``OPENAI_MAX_TOKENS``), and the
  server's context budget and tool concurrency where its settings have them: the values the
  started server was given, else the settings' defaults. For a server the runner did not start
  (``--url``) only what ``/info`` says is known.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter

from agent.models.openai_model import TEMPERATURE
from agent.settings import AgentSettings

MODEL_SETTINGS = {
    "openai_timeout": "timeout",
    "openai_max_retries": "max_retries",
    "openai_max_tokens": "max_tokens",
}
"""The agent's settings (``agent.settings``) every OpenAI-compatible model's section shows, by
the name it shows."""
EXTRA = re.compile(r"context|concurrency")
"""Other settings fields reported when the server has them (context budget, tool concurrency)."""


def endpoint_kind(base_url: str | None, api_key: bool) -> str:
    """``offline``, ``openai`` or ``openai-compatible at HOST:PORT``."""
    if not api_key:
        return "offline"
    if not base_url:
        return "openai"
    parts = urlsplit(base_url)
    if parts.hostname == "api.openai.com":
        return "openai"
    return f"openai-compatible at {parts.netloc or base_url}"


def _env_names(field: str) -> list[str]:
    alias = AgentSettings.model_fields[field].validation_alias
    names = [str(a) for a in getattr(alias, "choices", [])]
    return names or [f"THREADLINE_{field.upper()}"]


def _value(field: str, env: Mapping[str, str]) -> Any:
    """The field's value for a server started with ``env``: as given there, else its default."""
    info = AgentSettings.model_fields[field]
    for name in _env_names(field):
        if name in env:
            try:
                return TypeAdapter[Any](info.annotation or str).validate_python(env[name])
            except ValueError:
                return env[name]  # the server refuses it at start-up; show what it was given
    return info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]


def describe(env: Mapping[str, str] | None, info: Mapping[str, Any]) -> dict[str, Any]:
    """The model section of a result. ``env``: what the runner gave the server it started
    (None for ``--url``); ``info``: the server's ``GET /info``."""
    label = str(info.get("model") or "-")
    if env is None:
        match = re.fullmatch(r"openai:(?P<name>.+?)(?: at (?P<url>\S+))?", label)
        if match is None:
            return {"name": label, "endpoint": "offline", "settings": {}, "settings_known": False}
        return {
            "name": match["name"],
            "endpoint": endpoint_kind(match["url"], True),
            "base_url": match["url"],
            "settings": {"temperature": TEMPERATURE},
            "settings_known": False,
        }
    online = bool(env.get("OPENAI_API_KEY"))
    settings: dict[str, Any] = {}
    if online:
        settings["temperature"] = TEMPERATURE
        settings.update({shown: _value(f, env) for f, shown in MODEL_SETTINGS.items()})
    settings.update({f: _value(f, env) for f in AgentSettings.model_fields if EXTRA.search(f)})
    return {
        "name": (env.get("OPENAI_MODEL") or _value("openai_model", {})) if online else label,
        "endpoint": endpoint_kind(env.get("OPENAI_BASE_URL"), online),
        "base_url": env.get("OPENAI_BASE_URL"),
        "settings": settings,
        "settings_known": True,
    }


def of_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result's model section; results saved before it existed get one from ``/info``'s
    label."""
    model = result.get("model")
    if isinstance(model, dict):
        return model
    return describe(None, {"model": result.get("server", {}).get("model")})
