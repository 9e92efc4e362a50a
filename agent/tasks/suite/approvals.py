"""Multi-step tasks whose writes ask a human first (nothing pre-approves write_file/edit_file).

- ``release_notes``: read the version, then bump it and write the notes: two parallel asks.
- ``config_rollout``: list, read three env files at once, edit all three: three parallel asks.
- ``scaffold_package``: two files at once (two asks), then the tests (one more ask), then run them.

A rejected call ends the plan (``plans.play``); the check then fails, as it should.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from agent.tasks.base import PlannedReply, PlanView, Task
from agent.tasks.suite.plans import call, play, python_check, reply, result_text, template_text

# -- release_notes -----------------------------------------------------------------------------


class ReleaseParams(BaseModel):
    version: str = Field("1.4.0", pattern=r"^\d+\.\d+\.\d+$", description="The new version.")
    summary: str = Field(
        "Faster start-up.",
        min_length=1,
        max_length=200,
        pattern=r"^[^\n]+$",
        description="One line of release notes.",
    )

    @model_validator(mode="after")
    def is_new(self) -> ReleaseParams:
        if self.version == template_text("release_notes", "VERSION").strip():
            raise ValueError(f"{self.version} is the current version already")
        return self


def notes(p: ReleaseParams) -> str:
    return f"# Release {p.version}\n\n{p.summary}\n"


def _release_plan(p: ReleaseParams, view: PlanView) -> PlannedReply:
    return play(
        view,
        [
            [
                reply("Reading the current version.", call("read_file", path="VERSION")),
                lambda v: reply(
                    f"Bumping {result_text(v).strip()} to {p.version} and writing the notes.",
                    call("edit_file", path="VERSION", old=result_text(v).strip(), new=p.version),
                    call("write_file", path="RELEASE.md", content=notes(p)),
                ),
                reply(f"VERSION says {p.version} and RELEASE.md has its notes."),
            ]
        ],
    )


RELEASE_CHECK = """
import sys
version, notes = sys.argv[1], sys.argv[2]
for path, want in (('VERSION', version + '\\n'), ('RELEASE.md', notes)):
    try:
        got = open(path).read()
    except FileNotFoundError:
        sys.exit(f'{path} does not exist')
    if got != want:
        sys.exit(f'{path} holds {got!r}, expected {want!r}')
print(f'released {version}')
"""

RELEASE_NOTES = Task(
    name="release_notes",
    title="Bump the version and write release notes (two parallel approvals)",
    params_model=ReleaseParams,
    instruction=lambda p: (
        f"Release version {p.version}: replace the version in VERSION with {p.version}, and "
        f"write RELEASE.md with the heading '# Release {p.version}', a blank line, and the line "
        f"{p.summary!r}."
    ),
    check=lambda p: python_check(RELEASE_CHECK, p.version, notes(p)),
    plan=_release_plan,
    template="release_notes",
    kind="approval",
)


# -- config_rollout ----------------------------------------------------------------------------

ENVS = ("env/dev.env", "env/staging.env", "env/prod.env")


class RolloutParams(BaseModel):
    level: Literal["info", "warning", "error"] = Field("info", description="The new LOG_LEVEL.")


def _rollout_plan(p: RolloutParams, view: PlanView) -> PlannedReply:
    return play(
        view,
        [
            [
                reply("Finding the environment files.", call("list_files", path="env")),
                reply("Reading all three.", *(call("read_file", path=path) for path in ENVS)),
                reply(
                    f"Setting LOG_LEVEL={p.level} in each, all at once.",
                    *(
                        call(
                            "edit_file",
                            path=path,
                            old="LOG_LEVEL=debug",
                            new=f"LOG_LEVEL={p.level}",
                        )
                        for path in ENVS
                    ),
                ),
                reply(f"LOG_LEVEL is {p.level} in dev, staging and prod."),
            ]
        ],
    )


ROLLOUT_CHECK = """
import json, sys
level, originals = sys.argv[1], json.loads(sys.argv[2])
for path, original in originals.items():
    try:
        text = open(path).read()
    except FileNotFoundError:
        sys.exit(f'{path} does not exist')
    want = original.replace('LOG_LEVEL=debug', f'LOG_LEVEL={level}')
    if text != want:
        sys.exit(f'{path} is\\n{text}\\nexpected\\n{want}')
print(f'LOG_LEVEL={level} in {len(originals)} files')
"""

CONFIG_ROLLOUT = Task(
    name="config_rollout",
    title="Change a setting in three environments (three parallel approvals)",
    params_model=RolloutParams,
    instruction=lambda p: (
        f"Set LOG_LEVEL to {p.level} in every environment file under env/ (dev, staging, "
        "prod). Change nothing else."
    ),
    check=lambda p: python_check(
        ROLLOUT_CHECK,
        p.level,
        json.dumps({path: template_text("config_rollout", path) for path in ENVS}),
    ),
    plan=_rollout_plan,
    template="config_rollout",
    kind="approval",
)


# -- scaffold_package --------------------------------------------------------------------------


class ScaffoldParams(BaseModel):
    package: str = Field(
        "greetings", pattern=r"^[a-z][a-z_]{1,20}$", description="Name of the new package."
    )


CORE = '''"""Greetings."""


def greet(name):
    """A greeting for name."""
    return f"Hello, {name}!"
'''


def tests_of(package: str) -> str:
    return (
        "import unittest\n\n"
        f"from {package} import greet\n\n\n"
        "class GreetTest(unittest.TestCase):\n"
        "    def test_greet(self):\n"
        '        self.assertEqual(greet("Ada"), "Hello, Ada!")\n'
    )


def _scaffold_plan(p: ScaffoldParams, view: PlanView) -> PlannedReply:
    pkg = p.package
    return play(
        view,
        [
            [
                reply(
                    f"Creating the package {pkg}: both files at once.",
                    call(
                        "write_file", path=f"{pkg}/__init__.py", content="from .core import greet\n"
                    ),
                    call("write_file", path=f"{pkg}/core.py", content=CORE),
                ),
                reply(
                    "Adding its unit test.",
                    call("write_file", path=f"test_{pkg}.py", content=tests_of(pkg)),
                ),
                reply(
                    "Running the tests.", call("run_command", command=["python", "-m", "unittest"])
                ),
                reply(f"The package {pkg} exists with greet() and a passing test."),
            ]
        ],
    )


SCAFFOLD_CHECK = """
import importlib, os, sys, unittest
package = sys.argv[1]
sys.path.insert(0, os.getcwd())
try:
    module = importlib.import_module(package)
except ImportError as err:
    sys.exit(f'the package {package} cannot be imported: {err}')
if module.greet('Ada') != 'Hello, Ada!':
    sys.exit(f"{package}.greet('Ada') returned {module.greet('Ada')!r}, expected 'Hello, Ada!'")
if not os.path.exists(f'test_{package}.py'):
    sys.exit(f'test_{package}.py does not exist')
tests = unittest.defaultTestLoader.loadTestsFromName(f'test_{package}')
result = unittest.TextTestRunner().run(tests)
if result.testsRun == 0 or not result.wasSuccessful():
    sys.exit(f'test_{package}.py does not pass')
print(f'{package} is importable and tested')
"""

SCAFFOLD_PACKAGE = Task(
    name="scaffold_package",
    title="Create a package with a test (sequential and parallel approvals)",
    params_model=ScaffoldParams,
    instruction=lambda p: (
        f"Create a Python package {p.package!r} in the workspace: {p.package}/__init__.py "
        f"exporting greet, {p.package}/core.py where greet(name) returns 'Hello, <name>!', and "
        f"a unit test test_{p.package}.py at the workspace root. Run the tests."
    ),
    check=lambda p: python_check(SCAFFOLD_CHECK, p.package),
    plan=_scaffold_plan,
    template="scaffold_package",
    policy={"run_command": "auto"},  # only the writes ask
    kind="approval",
)

APPROVAL_TASKS = (RELEASE_NOTES, CONFIG_ROLLOUT, SCAFFOLD_PACKAGE)
