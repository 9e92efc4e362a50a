"""The command line of ``python -m eval`` (:func:`parse_args`), and the environment its options
give the server the runner starts (:func:`server_env`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

from eval.suite import available

EVAL_DIR = Path(__file__).parent


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m eval", description="Evaluate the agent on a task suite over HTTP."
    )
    p.add_argument("--suite", default="small", help=f"{' | '.join(available())} or a JSON file")
    p.add_argument("--reps", type=int, default=3, help="repetitions per task (default 3)")
    p.add_argument("--concurrency", type=int, default=4, help="episodes at once (default 4)")
    p.add_argument(
        "--decision",
        choices=["approve", "reject"],
        default="approve",
        help="how the runner answers approval requests (default approve)",
    )
    p.add_argument("--url", help="drive this running server instead of starting one")
    p.add_argument(
        "--database-url",
        help="admin URL to create the evaluation database on (default "
        "$THREADLINE_TEST_DATABASE_URL or postgresql://postgres@127.0.0.1:5432/postgres)",
    )
    p.add_argument("--openai-base-url", help="OpenAI-compatible endpoint for the started server")
    p.add_argument("--openai-model", help="model name for the started server")
    p.add_argument("--openai-timeout", type=float, help="OPENAI_TIMEOUT of the started server")
    p.add_argument(
        "--openai-max-retries", type=int, help="OPENAI_MAX_RETRIES of the started server"
    )
    p.add_argument("--openai-max-tokens", type=int, help="OPENAI_MAX_TOKENS of the started server")
    p.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another setting for the started server (repeatable): THREADLINE_MAX_STEPS=10, ...",
    )
    p.add_argument("--crash", action="store_true", help="SIGKILL the server while the suite runs")
    p.add_argument("--kills", type=int, default=10, help="kills in crash mode (default 10)")
    p.add_argument("--max-uptime", type=float, default=3.0, help="longest uptime before a kill (s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per episode")
    p.add_argument("--label", help="name of this result in the report (default from the suite)")
    p.add_argument("--results-dir", type=Path, default=EVAL_DIR / "results")
    p.add_argument("--report", type=Path, default=EVAL_DIR / "REPORT.md")
    p.add_argument("--plots-dir", type=Path, default=EVAL_DIR / "plots")
    p.add_argument("--no-report", action="store_true", help="write the JSON result only")
    p.add_argument(
        "--from-results", nargs="+", type=Path, help="render the report from these results only"
    )
    p.add_argument("--min-pass-rate", type=float, help="exit 1 when overall pass@1 is lower")
    p.add_argument("--quiet", action="store_true", help="no line per finished episode")
    opts = p.parse_args(argv)
    if opts.crash and opts.url:
        p.error("--crash needs a server the runner owns: drop --url")
    if opts.reps < 1 or opts.concurrency < 1 or opts.kills < 0:
        p.error("--reps and --concurrency must be at least 1, --kills at least 0")
    if opts.url and (opts.server_env or opts.openai_base_url or opts.openai_model):
        p.error("--server-env and --openai-* configure a server the runner starts: drop --url")
    if any("=" not in item for item in opts.server_env):
        p.error("--server-env takes NAME=VALUE")
    return opts


def server_env(opts: argparse.Namespace) -> dict[str, str]:
    """The environment the runner gives the server it starts: ``--server-env``, then the model's
    (``model_env``)."""
    extra = dict(item.split("=", 1) for item in opts.server_env)
    return {**extra, **model_env(opts)}


def model_env(opts: argparse.Namespace) -> dict[str, str]:
    """``OPENAI_*`` for the server the runner starts (none: the offline model). Any
    OpenAI-compatible endpoint (``--openai-base-url``) and model name (``--openai-model``)."""
    if not (opts.openai_base_url or opts.openai_model):
        return {}
    key = os.environ.get("OPENAI_API_KEY")
    if not key and not opts.openai_base_url:
        raise SystemExit("--openai-model without --openai-base-url needs OPENAI_API_KEY")
    env = {"OPENAI_API_KEY": key or "not-needed"}  # local servers (vLLM, Ollama) ignore it
    if opts.openai_base_url:
        env["OPENAI_BASE_URL"] = opts.openai_base_url
    if opts.openai_model:
        env["OPENAI_MODEL"] = opts.openai_model
    if opts.openai_timeout is not None:
        env["OPENAI_TIMEOUT"] = str(opts.openai_timeout)
    if opts.openai_max_retries is not None:
        env["OPENAI_MAX_RETRIES"] = str(opts.openai_max_retries)
    if opts.openai_max_tokens is not None:
        env["OPENAI_MAX_TOKENS"] = str(opts.openai_max_tokens)
    return env
