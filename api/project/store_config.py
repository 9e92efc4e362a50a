"""The ``"store"`` of a ``langgraph.json``, read and checked as LangGraph's server reads it
(``langgraph_api.config.schemas.StoreConfig``, ``langgraph_api.graph.resolve_embeddings``)::

    "store": {
        "index": {"embed": "openai:text-embedding-3-small", "dims": 1536,
                  "fields": ["content", "context"]},
        "ttl": {"refresh_on_read": true, "default_ttl": 1440, "sweep_interval_minutes": 5}
    }

``index.embed`` is ``"provider:model"`` (``openai`` here through ``langchain-openai``'s
``OpenAIEmbeddings``, with ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` from the environment or the
project's ``.env``; other providers through ``langchain``'s ``init_embeddings`` when installed),
``"./path/file.py:name"`` (relative to the config file) or ``"package.module:name"``: an
``Embeddings`` object or a function, sync or async, from a list of texts to their vectors.
``index.fields`` are the paths embedded (default ``["$"]``, the whole value). ``ttl`` is
LangGraph's ``TTLConfig``: minutes, and the store's sweeper deletes what expired.

Differences, each on purpose: a key LangGraph does not know is an error here (LangGraph ignores
it); ``sweep_interval_minutes`` may be a fraction (LangGraph wants an integer); ``"path"`` (a
custom ``BaseStore``) is refused, not served; with ``OPENAI_BASE_URL`` naming another server than
OpenAI's, texts are sent as text (LangChain's advice for OpenAI-compatible servers), not as
OpenAI's tokens (which need ``tiktoken``'s download and which such servers seldom read).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from langchain_core.embeddings import Embeddings
from langgraph.store.base import TTLConfig, ensure_embeddings

from api.contract.memory import MAX_TTL_MINUTES
from api.project.embedder import CheckedEmbeddings
from api.project.graphs import GraphConfigError, load_attr, read_config

MAX_DIMS = 16_000
"""pgvector's ``vector`` holds at most this many dimensions."""
PROVIDERS = frozenset(
    {
        "azure_ai",
        "azure_openai",
        "bedrock",
        "cohere",
        "google_genai",
        "google_vertexai",
        "huggingface",
        "mistralai",
        "ollama",
        "openai",
    }
)
"""``init_embeddings``'s providers: ``"<provider>:<model>"`` names a model, not a module."""
STORE_KEYS = ("index", "ttl")
INDEX_KEYS = ("embed", "dims", "fields")
TTL_KEYS = ("refresh_on_read", "default_ttl", "sweep_interval_minutes")


@dataclass(frozen=True)
class IndexSpec:
    """``store.index``: what to embed and with what."""

    embed: str
    """As written in the config (for messages)."""
    dims: int
    fields: list[str]
    embeddings: CheckedEmbeddings


@dataclass(frozen=True)
class StoreConfig:
    index: IndexSpec | None = None
    ttl: TTLConfig | None = None


def load_store_config(config_file: Path | None) -> StoreConfig:
    """The ``"store"`` of ``config_file`` (none: the plain store)."""
    if config_file is None:
        return StoreConfig()
    data = read_config(config_file)
    return read_store_config(config_file, data if isinstance(data, dict) else {})


def read_store_config(config_file: Path, data: dict[str, Any]) -> StoreConfig:
    """``data["store"]`` checked, its embedder made: a :class:`GraphConfigError` that says what
    to fix otherwise. Call it once the project's env is loaded and its code importable."""
    store = data.get("store")
    if store is None:
        return StoreConfig()
    where = f'{config_file}: "store"'
    if not isinstance(store, dict):
        raise GraphConfigError(f'{where} must be an object with "index" and/or "ttl"')
    if "path" in store:
        raise GraphConfigError(
            f"{where}.path (a custom BaseStore) is not served by threadline: remove it; the "
            'built-in PostgreSQL store takes "index" and "ttl"'
        )
    _known_keys(f"{where}", store, STORE_KEYS)
    index = store.get("index")
    ttl = store.get("ttl")
    return StoreConfig(
        index=_index(config_file, index) if index is not None else None,
        ttl=_ttl(f"{where}.ttl", ttl) if ttl is not None else None,
    )


def _known_keys(where: str, value: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = [k for k in value if k not in known]
    if unknown:
        raise GraphConfigError(
            f"{where} has unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}; it takes "
            f"{', '.join(repr(k) for k in known)}"
        )


def _index(config_file: Path, index: Any) -> IndexSpec:
    where = f'{config_file}: "store.index"'
    if not isinstance(index, dict):
        raise GraphConfigError(f'{where} must be an object with "embed" and "dims"')
    _known_keys(where, index, INDEX_KEYS)
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or not 0 < dims <= MAX_DIMS:
        raise GraphConfigError(
            f"{where}.dims must be a positive integer of at most {MAX_DIMS}: the length of the "
            f"embedder's vectors (1536 for openai:text-embedding-3-small), not {dims!r}"
        )
    fields = index.get("fields")
    if fields is None:
        fields = ["$"]
    if (
        not isinstance(fields, list)
        or not fields
        or not all(isinstance(f, str) and f for f in fields)
    ):
        raise GraphConfigError(
            f'{where}.fields must be a non-empty list of paths into the value (["$"], the '
            f'whole value, by default; e.g. ["text", "tags[*]"]), not {fields!r}'
        )
    embed = index.get("embed")
    if not isinstance(embed, str) or not embed.strip():
        raise GraphConfigError(
            f'{where}.embed must be "provider:model" (e.g. "openai:text-embedding-3-small") '
            f'or "./file.py:function", not {embed!r}'
        )
    inner = resolve_embed(config_file, embed)
    return IndexSpec(
        embed=embed,
        dims=dims,
        fields=list(fields),
        embeddings=CheckedEmbeddings(inner, dims=dims, label=embed),
    )


def resolve_embed(config_file: Path, embed: str) -> Embeddings:
    """The embedder ``embed`` names (see the module's docstring)."""
    where = f'{config_file}: "store.index.embed" {embed!r}'
    target, sep, name = embed.rpartition(":")
    if not sep or not target or not name:
        raise GraphConfigError(
            f'{where} must be "provider:model" (e.g. "openai:text-embedding-3-small"), '
            '"./file.py:function" or "package.module:function"'
        )
    is_file = target.endswith(".py") or "/" in target
    if not is_file and target in PROVIDERS:
        return _provider_model(where, target, name)
    base = config_file.absolute().parent
    if is_file and not (base / target).is_file():
        raise GraphConfigError(
            f"{where}: {(base / target).resolve()} does not exist (a path is relative to the "
            "config file)"
        )
    try:
        found = load_attr(embed, base)
    except GraphConfigError as err:
        raise GraphConfigError(f"{where}: {err}") from None
    if isinstance(found, Embeddings):
        return found
    if not callable(found):
        raise GraphConfigError(
            f"{where} is a {type(found).__name__}, not an embedding function (texts → vectors) "
            "or a LangChain Embeddings object"
        )
    return ensure_embeddings(found)


def _provider_model(where: str, provider: str, model: str) -> Embeddings:
    try:
        if provider == "openai":
            return openai_embeddings(model)
        try:
            from langchain.embeddings import init_embeddings
        except ImportError:
            raise GraphConfigError(
                f"{where}: models of {provider!r} are made by langchain's init_embeddings; "
                "install langchain and the provider's package into threadline's environment, "
                'or name an embedding function ("./file.py:function")'
            ) from None
        return init_embeddings(f"{provider}:{model}")
    except GraphConfigError:
        raise
    except Exception as err:  # the provider's own check (a missing key, package, ...)
        first = str(err).splitlines()[0] if str(err) else ""
        raise GraphConfigError(
            f"{where}: cannot make the embedder: {type(err).__name__}: {first} (set what it "
            'needs in the environment or the project\'s "env")'
        ) from None


def openai_embeddings(model: str) -> Embeddings:
    """``OpenAIEmbeddings(model)``; an OpenAI-compatible server (``OPENAI_BASE_URL`` not
    OpenAI's) gets the texts as they are, not OpenAI's tokens."""
    from langchain_openai import OpenAIEmbeddings

    base = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    compatible = bool(base) and urlsplit(base or "").hostname != "api.openai.com"
    return OpenAIEmbeddings(model=model, check_embedding_ctx_length=not compatible)


def _ttl(where: str, ttl: Any) -> TTLConfig:
    if not isinstance(ttl, dict):
        raise GraphConfigError(f"{where} must be an object ({', '.join(TTL_KEYS)})")
    _known_keys(where, ttl, TTL_KEYS)
    out = TTLConfig()
    if "refresh_on_read" in ttl:
        if not isinstance(ttl["refresh_on_read"], bool):
            raise GraphConfigError(
                f"{where}.refresh_on_read must be true or false, not {ttl['refresh_on_read']!r}"
            )
        out["refresh_on_read"] = ttl["refresh_on_read"]
    for key in ("default_ttl", "sweep_interval_minutes"):
        value = ttl.get(key)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= MAX_TTL_MINUTES
        ):
            raise GraphConfigError(
                f"{where}.{key} must be a positive number of minutes (at most "
                f"{MAX_TTL_MINUTES}, a century) or null, not {value!r}"
            )
        out[key] = value
    return out
