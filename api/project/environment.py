"""The project a ``langgraph.json`` describes, made runnable in this process as LangGraph's CLI
makes it: its ``"env"`` loaded and its ``"dependencies"`` importable, before any of its code is
imported (graphs, auth); then its graphs imported, so a project that cannot start says why in one
line (:class:`~api.project.graphs.GraphConfigError`) before the server listens.

What LangGraph does, and what is done here (``langgraph_cli/cli.py`` ``dev``,
``langgraph_api/cli.py`` ``run_server``, ``langgraph_cli/config.py`` ``_assemble_local_deps``):

- ``"env"``: a ``.env`` file (python-dotenv, ``${VAR}`` expanded) or a mapping of literal values.
  Its values win over the process environment, as with ``langgraph dev``; a key the file names
  without a value is removed from it (``langgraph dev`` too). Paths are relative to the config
  file (``langgraph dev`` resolves them against its working directory, which is the config's
  when run as documented). A missing file is an error here (``langgraph dev`` ignores it,
  ``langgraph up``'s compose file fails on it). threadline's own settings were read before: the
  file configures the project's code, not the server.
- ``"dependencies"``: an entry starting with ``.`` (or ``/``) is a local directory, put on
  ``sys.path`` after what is installed (``langgraph dev`` appends it; the config's directory is
  always there, as ``langgraph dev`` adds its working directory). What the Docker build would
  install from it is importable too: a directory with ``pyproject.toml``/``setup.py`` and a
  ``src/`` puts ``src`` on the path (the src layout); one with ``__init__.py`` puts its parent
  (a package named for the directory). Any other entry is a package requirement: nothing is
  installed here, so one that is not installed stops the start (the name is checked, not the
  version).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from api.project.graphs import GraphConfigError, import_graphs, read_config
from api.project.store_config import read_store_config

logger = logging.getLogger(__name__)

REQUIREMENT_NAME = re.compile(
    r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:[@<>=!~;(]|$)"
)
"""The distribution name at the start of a pip requirement (``name[extra]>=1; marker``)."""


def prepare_project(config_file: Path) -> dict[str, Any]:
    """Load the config's env, make its dependencies importable, then import its graphs (not
    compiled yet): graph id → the object its spec names."""
    data = read_config(config_file)
    if not isinstance(data, dict):
        raise GraphConfigError(f"{config_file} must hold a JSON object")
    base = config_file.absolute().parent
    warn_of_unserved_keys(config_file, data)
    load_env(config_file, base, data.get("env"))
    add_dependencies(config_file, base, data.get("dependencies", []))
    read_store_config(config_file, data)  # checked now: a bad "store" stops the start here
    return import_graphs(config_file)


SERVED_KEYS = frozenset(
    {"graphs", "dependencies", "env", "auth", "mcp_servers", "store", "http", "checkpointer"}
)
BUILD_KEYS = frozenset(
    {
        "$schema",
        "python_version",
        "node_version",
        "pip_config_file",
        "pip_installer",
        "dockerfile_lines",
        "base_image",
        "image_distro",
        "keep_pkg_tools",
        "api_version",
    }
)
"""Keys of LangGraph's image build (``langgraph build``/``up``); a running server, ``langgraph
dev`` too, has no use for them."""


def warn_of_unserved_keys(config_file: Path, data: dict[str, Any]) -> None:
    """Say at start-up which of the config's keys this server does not serve yet (``ui``,
    ``webhooks``, ...): their settings do not apply. (``http`` and ``checkpointer`` name what
    they do not serve themselves: ``api.project.http_config``, ``api.runs.thread_ttl``.)"""
    unserved = sorted(k for k in data if k not in SERVED_KEYS | BUILD_KEYS)
    if unserved:
        logger.warning(
            "%s: %s not served by threadline yet and ignored (README: Bring your LangGraph "
            "project); the graphs run without %s",
            config_file,
            ", ".join(repr(k) for k in unserved),
            "it" if len(unserved) == 1 else "them",
        )


def load_env(config_file: Path, base: Path, env: Any) -> None:
    """Put the config's ``"env"`` (a ``.env`` path or a mapping) into ``os.environ``."""
    if env is None or env == {}:
        return
    if isinstance(env, str):
        path = base / env
        if not path.is_file():
            raise GraphConfigError(
                f'{config_file}: "env" names {path}, which is not a file; create it '
                "(KEY=value lines) or fix the path (relative to the config file)"
            )
        try:
            values = dotenv_values(path)
        except (OSError, UnicodeDecodeError) as err:
            raise GraphConfigError(f'{config_file}: cannot read its "env" {path}: {err}') from None
        source = str(path)
    elif isinstance(env, dict):
        values = {}
        for key, value in env.items():
            if not isinstance(value, str | int | float | bool):
                raise GraphConfigError(
                    f'{config_file}: "env" value of {key!r} must be a string, not {value!r}'
                )
            values[key] = str(value)
        source = '"env"'
    else:
        raise GraphConfigError(f'{config_file}: "env" must be a .env file path or an object')
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)  # a bare `KEY` line unsets it, as `langgraph dev` does
        else:
            os.environ[key] = value
    logger.info("environment from %s: %s", source, ", ".join(sorted(values)) or "(empty)")


def add_dependencies(config_file: Path, base: Path, dependencies: Any) -> None:
    """Put the local dependencies on ``sys.path``; check the package ones are installed."""
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise GraphConfigError(f'{config_file}: "dependencies" must be a list of strings')
    roots = [base]
    missing = []
    for dependency in dependencies:
        if dependency.startswith((".", "/")):
            roots += _local_roots(config_file, base, dependency)
        elif not _installed(dependency):
            missing.append(dependency)
    if missing:
        one = len(missing) == 1
        names = ", ".join(repr(m) for m in missing)
        command = " ".join([sys.executable, "-m", "pip", "install", *map(shlex.quote, missing)])
        raise GraphConfigError(
            f"{config_file}: {'dependency' if one else 'dependencies'} {names} not installed in "
            f"threadline's environment; install {'it' if one else 'them'} ({command}): "
            "threadline serves a project with the packages already installed and installs none"
        )
    for root in dict.fromkeys(roots):
        if str(root) not in sys.path:
            sys.path.append(str(root))
        _warn_of_shadowed_packages(root)
    logger.info("project code importable from %s", ", ".join(str(r) for r in dict.fromkeys(roots)))


def _local_roots(config_file: Path, base: Path, dependency: str) -> list[Path]:
    """The directories that make a local dependency importable (see the module's docstring)."""
    path = (base / dependency).resolve()
    if not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise GraphConfigError(
            f"{config_file}: dependency {dependency!r} is {path}, which {what}; a local "
            "dependency is a directory of Python code, relative to the config file"
        )
    roots = [path]
    packaged = (path / "pyproject.toml").is_file() or (path / "setup.py").is_file()
    if packaged and (path / "src").is_dir():
        roots.append(path / "src")
    elif not packaged and (path / "__init__.py").is_file():
        roots.append(path.parent)
    return roots


def _installed(requirement: str) -> bool:
    """Whether the distribution (or, failing that, the module) a requirement names is here; a
    requirement without a name (a URL) cannot be checked and passes."""
    match = REQUIREMENT_NAME.match(requirement)
    if match is None:
        logger.warning("dependency %r: not a package name, not checked", requirement)
        return True
    name = match.group(1)
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return name.isidentifier() and importlib.util.find_spec(name) is not None
    return True


def _warn_of_shadowed_packages(root: Path) -> None:
    """A project package named like one already imported (threadline's own ``agent``, ``api``,
    ``cli``, ``eval``) is not the one its code gets: say so before its import fails."""
    for child in sorted(root.iterdir()):
        name = child.stem if child.suffix == ".py" else child.name
        module = sys.modules.get(name)
        if module is None or not (child.suffix == ".py" or (child / "__init__.py").is_file()):
            continue
        origin = getattr(module, "__file__", None) or ""
        if not Path(origin).is_relative_to(child):
            logger.warning(
                "the project's %s has the name of a module already loaded from %s: `import %s` "
                "in the project's code gets that one; rename the project's",
                child,
                origin or "threadline",
                name,
            )
