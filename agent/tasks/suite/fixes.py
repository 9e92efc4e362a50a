"""Fix-until-green tasks: tiny modules whose ``unittest`` tests fail until the code is fixed.

Bugs: an off-by-one (``fix_window``), a wrong string format (``fix_price``), a missing edge case
(``fix_median``, whose plan fixes only half of it first, so the check fails and the verify
feedback makes it finish the job) and a too-naive implementation (``fix_slug``). The checks also
refuse a changed test file. Commands and edits are pre-approved by the task policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from agent.tasks.base import PlannedCall, PlannedReply, PlanView, Task
from agent.tasks.suite.plans import TESTS, call, play, reply, unittest_check

FIXES_AUTO = {"run_command": "auto", "edit_file": "auto", "write_file": "auto"}


class NoParams(BaseModel):
    pass


def edit(path: str, old: str, new: str) -> PlannedCall:
    return call("edit_file", path=path, old=old, new=new)


def fix_plan(
    module: str, edits: Sequence[tuple[str, PlannedCall]], done: str
) -> list[PlannedReply]:
    """Read the code and run the tests, apply each edit in its own step, test again, answer."""
    return [
        reply(
            f"Reading {module} and running the tests.",
            call("read_file", path=module),
            call("run_command", command=TESTS),
        ),
        *(reply(why, c) for why, c in edits),
        reply("Running the tests again.", call("run_command", command=TESTS)),
        reply(done),
    ]


def fix_task(
    name: str, title: str, module: str, test: str, bug: str, plan: list[list[PlannedReply]]
) -> Task:
    def _plan(_: NoParams, view: PlanView) -> PlannedReply:
        return play(view, plan)

    return Task(
        name=name,
        title=title,
        params_model=NoParams,
        instruction=lambda _: (
            f"The tests in {test} fail: {bug}. Fix {module} (not the tests) and run "
            "`python -m unittest` until they pass."
        ),
        check=lambda _: unittest_check(name, [test]),
        plan=_plan,
        template=name,
        policy=FIXES_AUTO,
        kind="fix",
    )


FIX_WINDOW = fix_task(
    "fix_window",
    "Fix an off-by-one",
    "window.py",
    "test_window.py",
    "window() should include its end position",
    [
        fix_plan(
            "window.py",
            [
                (
                    "The slice stops one short of end; including it.",
                    edit("window.py", "return items[start:end]", "return items[start : end + 1]"),
                )
            ],
            "window() now includes its end position; the tests pass.",
        )
    ],
)

FIX_PRICE = fix_task(
    "fix_price",
    "Fix a wrong string format",
    "price.py",
    "test_price.py",
    "format_price() shows the cents wrong",
    [
        fix_plan(
            "price.py",
            [
                (
                    "Cents below 10 lose their leading zero; padding them to two digits.",
                    edit("price.py", '"$%d.%d"', '"$%d.%02d"'),
                )
            ],
            "format_price() pads the cents to two digits; the tests pass.",
        )
    ],
)

EVEN_OLD = "    return ordered[len(ordered) // 2]\n"
EVEN_NEW = (
    "    middle = len(ordered) // 2\n"
    "    if len(ordered) % 2 == 0:\n"
    "        return (ordered[middle - 1] + ordered[middle]) / 2\n"
    "    return ordered[middle]\n"
)
EMPTY_OLD = "    ordered = sorted(values)\n"
EMPTY_NEW = (
    "    if not values:\n"
    '        raise ValueError("median() of an empty list")\n'
    "    ordered = sorted(values)\n"
)

FIX_MEDIAN = fix_task(
    "fix_median",
    "Fix a missing edge case (the first try fails its check)",
    "stats.py",
    "test_stats.py",
    "median() is wrong for some inputs",
    [
        [  # a hasty first try: fixes even lengths, runs nothing, and misses the empty list
            reply("Reading stats.py.", call("read_file", path="stats.py")),
            reply(
                "Even lengths need the mean of the two middle values.",
                edit("stats.py", EVEN_OLD, EVEN_NEW),
            ),
            reply("median() now handles even lengths."),
        ],
        [  # after the check's feedback
            reply(
                "The empty list must raise ValueError; adding that.",
                edit("stats.py", EMPTY_OLD, EMPTY_NEW),
            ),
            reply("Running the tests.", call("run_command", command=TESTS)),
            reply("median() handles even lengths and refuses an empty list; the tests pass."),
        ],
    ],
)

FIX_SLUG = fix_task(
    "fix_slug",
    "Fix a too-naive implementation",
    "slug.py",
    "test_slug.py",
    "slugify() keeps punctuation and repeated hyphens",
    [
        fix_plan(
            "slug.py",
            [
                (
                    "Slugs need the re module.",
                    edit(
                        "slug.py",
                        '"""URL slugs for article titles."""\n',
                        ('"""URL slugs for article titles."""\n\nimport re\n'),
                    ),
                ),
                (
                    "Keeping only runs of letters and digits, joined by hyphens.",
                    edit(
                        "slug.py",
                        'return title.lower().replace(" ", "-")',
                        'return "-".join(re.findall(r"[a-z0-9]+", title.lower()))',
                    ),
                ),
            ],
            "slugify() keeps only words of letters and digits; the tests pass.",
        )
    ],
)

FIX_TASKS = (FIX_WINDOW, FIX_PRICE, FIX_MEDIAN, FIX_SLUG)
