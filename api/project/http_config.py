"""The ``"http"`` key of a ``langgraph.json``, checked at start-up as LangGraph Server reads it
(``langgraph_api/config/schemas.py`` ``HttpConfig``, ``server.py``, ``api/__init__.py``): a
value of the wrong type stops the start with one line
(:class:`~api.project.graphs.GraphConfigError`).

What each key does here:

- ``app``: the project's Starlette or FastAPI app, served beside the API (``api.http.custom_app``).
- ``disable_assistants``, ``disable_threads``, ``disable_runs``, ``disable_store``,
  ``disable_mcp``, ``disable_meta``: those routes answer 404 (``api.project.route_groups``).
- ``cors``: Starlette's ``CORSMiddleware`` with exactly these options, as LangGraph builds it. It
  replaces threadline's own CORS (``THREADLINE_CORS_ORIGINS``), which only fills
  ``allow_origins`` when the config names none (LangGraph's ``CORS_ALLOW_ORIGINS`` rule). The
  Origin check at the door (``api.http.auth_guard``) admits the same origins.
- ``enable_custom_route_auth``, ``middleware_order``: as on LangGraph (``api.http.custom_app``).
- ``disable_ui``, ``disable_a2a``, ``disable_event_streaming``: threadline serves no ``/ui``,
  ``/a2a`` or event-streaming routes, so there is nothing for them to turn off.
- ``mount_prefix``: not served, and refused (every client would get 404 on the prefixed paths).
- ``configurable_headers``, ``logging_headers``, ``disable_webhooks``: checked, not applied (a
  start-up warning says so): runs get no request headers in ``config.configurable``, logs hold
  no request headers, and runs' webhooks are called (``HttpOptions.disable_webhooks`` has it).

A key LangGraph does not know is named in a warning (LangGraph ignores it).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.project.graphs import GraphConfigError, read_config

logger = logging.getLogger(__name__)

GROUPS = ("assistants", "threads", "runs", "store", "mcp", "meta")
"""Route groups a ``disable_<group>`` turns off (``api.project.route_groups``)."""
JS_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")


class ConfigModel(BaseModel):
    """A part of a ``langgraph.json``, validated as LangGraph's ``TypeAdapter`` does (pydantic's
    lax mode: ``"true"`` is a boolean, ``"60"`` a number): a config LangGraph takes starts."""

    model_config = ConfigDict(extra="ignore")


class Cors(ConfigModel):
    """``CorsConfig``: ``CORSMiddleware``'s own options."""

    allow_origins: list[str] | None = None
    allow_methods: list[str] | None = None
    allow_headers: list[str] | None = None
    allow_credentials: bool | None = None
    allow_origin_regex: str | None = None
    expose_headers: list[str] | None = None
    max_age: int | None = Field(None, ge=0)


class Headers(ConfigModel):
    """``ConfigurableHeaders``."""

    includes: list[str] | None = None
    excludes: list[str] | None = None
    include: list[str] | None = None
    exclude: list[str] | None = None


class Http(ConfigModel):
    app: str | None = None
    disable_assistants: bool = False
    disable_threads: bool = False
    disable_runs: bool = False
    disable_store: bool = False
    disable_meta: bool = False
    disable_mcp: bool = False
    disable_ui: bool = False
    disable_a2a: bool = False
    disable_webhooks: bool = False
    disable_event_streaming: bool = False
    cors: Cors | None = None
    mount_prefix: str | None = None
    configurable_headers: Headers | None = None
    logging_headers: Headers | None = None
    enable_custom_route_auth: bool = False
    middleware_order: Literal["auth_first", "middleware_first"] | None = None


DEFAULT_CORS: dict[str, Any] = {
    "allow_credentials": True,
    "allow_methods": ["*"],
    "allow_headers": ["*"],
    "expose_headers": ["Content-Location", "Location"],
}
"""threadline's CORS without a ``cors`` config (origins: ``THREADLINE_CORS_ORIGINS``)."""


@dataclass(frozen=True)
class HttpOptions:
    """The project's ``"http"``, checked; the defaults are a server without one."""

    app: str | None = None
    """``path/to/file.py:attr`` or ``module:attr``, relative to ``base``."""
    base: Path = Path()
    disabled: frozenset[str] = frozenset()
    """Route groups not served (``GROUPS``)."""
    cors: dict[str, Any] | None = None
    """The config's ``cors`` options as given (None: threadline's own CORS)."""
    custom_route_auth: bool = False
    """``enable_custom_route_auth``: the project's routes need credentials too."""
    auth_first: bool = False
    """``middleware_order: auth_first``: the project's middleware runs after authentication."""
    disable_webhooks: bool = False
    """Not applied yet (webhook delivery, ``api.engine.webhooks``, does not read it)."""

    def cors_options(self, origins: list[str]) -> dict[str, Any]:
        """``CORSMiddleware``'s keyword arguments; ``origins``: ``THREADLINE_CORS_ORIGINS``."""
        if self.cors is None:
            return {**DEFAULT_CORS, "allow_origins": list(origins)}
        options = dict(self.cors)
        if options.get("allow_origins") is None:
            options["allow_origins"] = list(origins)
        return {k: v for k, v in options.items() if v is not None}


def read_http(config_file: Path | None) -> HttpOptions:
    """The config's ``"http"`` (defaults without a config or the key); a wrong value raises
    :class:`GraphConfigError`, a key not served or not known is named in a warning."""
    data = read_config(config_file) if config_file else None
    raw = data.get("http") if isinstance(data, dict) else None
    if raw is None or config_file is None:
        return HttpOptions()
    if not isinstance(raw, dict):
        raise GraphConfigError(f'{config_file}: "http" must be an object')
    http = validated(config_file, "http", Http, raw)
    if isinstance(raw.get("cors"), dict):
        warn_of_unknown(config_file, "http.cors", Cors, raw["cors"])
    unserved = []
    if http.mount_prefix:
        raise GraphConfigError(
            f'{config_file}: "http.mount_prefix" ({http.mount_prefix!r}) is not served by '
            "threadline: its routes are at the root. Remove it, or serve threadline behind a "
            "reverse proxy that strips the prefix"
        )
    if http.configurable_headers is not None:
        unserved.append("configurable_headers (runs get no request headers in their config)")
    if http.logging_headers is not None:
        unserved.append("logging_headers (threadline logs no request headers)")
    if unserved:
        logger.warning(
            '%s: "http" settings not served by threadline and ignored: %s',
            config_file,
            "; ".join(unserved),
        )
    if http.app is not None:
        check_app_spec(config_file, http.app)
    cors = http.cors.model_dump() if http.cors is not None else None
    if cors and cors["allow_origin_regex"] is not None:
        try:
            re.compile(cors["allow_origin_regex"])
        except re.error as err:
            raise GraphConfigError(
                f'{config_file}: "http.cors.allow_origin_regex" is not a regular expression: {err}'
            ) from None
    return HttpOptions(
        app=http.app,
        base=config_file.absolute().parent,
        disabled=frozenset(g for g in GROUPS if getattr(http, f"disable_{g}")),
        cors=cors,
        custom_route_auth=http.enable_custom_route_auth,
        auth_first=http.middleware_order == "auth_first",
        disable_webhooks=http.disable_webhooks,
    )


def check_app_spec(config_file: Path, spec: str) -> None:
    """``http.app`` names a Python object: ``./file.py:attr`` or ``module:attr``."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise GraphConfigError(
            f"{config_file}: \"http.app\" {spec!r} must look like './path/to/file.py:app' or "
            "'package.module:app'"
        )
    if target.endswith(JS_SUFFIXES):
        raise GraphConfigError(
            f'{config_file}: "http.app" {spec!r} is a JavaScript app; threadline serves Python '
            "(Starlette or FastAPI) apps only"
        )


def validated(config_file: Path, where: str, model: type[ConfigModel], raw: dict[str, Any]) -> Any:
    """``raw`` as ``model``; its keys ``model`` does not know are named in a warning (LangGraph
    ignores them), a wrong value is one :class:`GraphConfigError` line."""
    warn_of_unknown(config_file, where, model, raw)
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in (where, *first["loc"]))
        raise GraphConfigError(
            f'{config_file}: "{loc}": {first["msg"]} (got {first["input"]!r})'
        ) from None


def warn_of_unknown(
    config_file: Path, where: str, model: type[ConfigModel], raw: dict[str, Any]
) -> None:
    """Name ``raw``'s keys ``model`` does not know in a warning."""
    unknown = sorted(set(raw) - set(model.model_fields))
    if unknown:
        logger.warning(
            '%s: "%s" has %s LangGraph does not define, ignored: %s',
            config_file,
            where,
            "a key" if len(unknown) == 1 else "keys",
            ", ".join(repr(k) for k in unknown),
        )
