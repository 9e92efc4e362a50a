"""File-edit tasks: rename a JSON key, add a changelog entry, replace a word (and, from
``rendering``, render a template).

Their writes are pre-approved (the task policy): they measure editing, not approvals.
``changelog``'s plan fails the check on its first try (it appends the release at the end) and fixes
the order after the verify feedback, to exercise that loop.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from agent.tasks.base import PlannedReply, PlanView, Task
from agent.tasks.suite.plans import (
    EDITS_AUTO,
    call,
    play,
    python_check,
    reply,
    result_text,
    template_text,
)
from agent.tasks.suite.rendering import FROM_TEMPLATE

# -- rename_key --------------------------------------------------------------------------------


class RenameKeyParams(BaseModel):
    key: Literal["timeout", "retries", "port"] = Field(
        "timeout", description="Top-level key of config.json to rename."
    )
    new: str = Field(
        "timeout_seconds", pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Its new name."
    )

    @model_validator(mode="after")
    def new_name_is_free(self) -> RenameKeyParams:
        if self.new in json.loads(template_text("rename_key", "config.json")):
            raise ValueError(f"config.json already has a key {self.new!r}; pick another name")
        return self


def _rename_plan(p: RenameKeyParams, view: PlanView) -> PlannedReply:
    # The newline and two-space indent pick the top-level key, not the nested one of that name.
    old = f'\n  "{p.key}": '
    return play(
        view,
        [
            [
                reply("Reading config.json.", call("read_file", path="config.json")),
                reply(
                    f"Renaming the top-level key {p.key!r} to {p.new!r} in place.",
                    call("edit_file", path="config.json", old=old, new=f'\n  "{p.new}": '),
                ),
                reply(f"config.json now names {p.key!r} {p.new!r}; everything else is as it was."),
            ]
        ],
    )


RENAME_CHECK = """
import json, sys
original, key, new = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    data = json.load(open('config.json'))
except (OSError, ValueError) as err:
    sys.exit(f'config.json is not readable JSON: {err}')
want = {(new if k == key else k): v for k, v in original.items()}
if key in data:
    sys.exit(f'config.json still has the key {key!r}')
if data != want or list(data) != list(want):
    sys.exit(f'config.json is {data}, expected {want} (same order, only the key renamed)')
print(f'{key!r} is now {new!r}')
"""

RENAME_KEY = Task(
    name="rename_key",
    title="Rename a key in a JSON config",
    params_model=RenameKeyParams,
    instruction=lambda p: (
        f"Rename the top-level key {p.key!r} of config.json to {p.new!r}. Keep its value, its "
        "place and every other key (nested keys with the same name are not the same setting)."
    ),
    check=lambda p: python_check(
        RENAME_CHECK, template_text("rename_key", "config.json"), p.key, p.new
    ),
    plan=_rename_plan,
    template="rename_key",
    policy=EDITS_AUTO,
    kind="edit",
)


# -- changelog ---------------------------------------------------------------------------------


class ChangelogParams(BaseModel):
    version: str = Field("0.4.0", pattern=r"^\d+\.\d+\.\d+$", description="The new release.")
    date: str = Field("2024-06-01", pattern=r"^\d{4}-\d{2}-\d{2}$", description="Its date.")
    entry: str = Field(
        "Add the evaluation runner.",
        min_length=1,
        max_length=200,
        pattern=r"^[^\n]+$",
        description="The release's one change.",
    )


def _section(p: ChangelogParams) -> str:
    return f"## {p.version} - {p.date}\n\n- {p.entry}\n"


def _reordered(p: ChangelogParams, view: PlanView) -> PlannedReply:
    """Move the section appended at the end to the top, from the file as read."""
    text = result_text(view)
    section = _section(p)
    text = text.replace("\n" + section, "", 1) if text.endswith(section) else text
    first = text.index("\n## ") + 1
    fixed = text[:first] + section + "\n" + text[first:]
    return reply(
        "The newest release goes first; moving the section to the top.",
        call("write_file", path="CHANGELOG.md", content=fixed),
    )


def _changelog_plan(p: ChangelogParams, view: PlanView) -> PlannedReply:
    return play(
        view,
        [
            [  # first try: append at the end (wrong place: releases are newest first)
                reply(
                    f"Appending the {p.version} section to CHANGELOG.md.",
                    call(
                        "write_file", path="CHANGELOG.md", content="\n" + _section(p), append=True
                    ),
                ),
                reply(f"CHANGELOG.md has a {p.version} section."),
            ],
            [  # after the check's feedback
                reply("Reading CHANGELOG.md again.", call("read_file", path="CHANGELOG.md")),
                lambda v: _reordered(p, v),
                reply(f"The {p.version} section is now the first release in CHANGELOG.md."),
            ],
        ],
    )


CHANGELOG_CHECK = """
import re, sys
version, date, entry, original = sys.argv[1:5]
try:
    text = open('CHANGELOG.md').read()
except FileNotFoundError:
    sys.exit('CHANGELOG.md does not exist')
heads = re.findall(r'^## (\\S+) - (\\S+)$', text, re.M)
if (version, date) not in heads:
    sys.exit(f'no section "## {version} - {date}" in CHANGELOG.md (sections: {heads})')
if heads[0] != (version, date):
    sys.exit(f'releases are listed newest first, but the first section is {heads[0]}; '
             f'{version} must come before it')
new = f'## {version} - {date}\\n\\n- {entry}\\n\\n'
start = original.index('\\n## ') + 1
if text != original[:start] + new + original[start:]:
    sys.exit(f'CHANGELOG.md should be the original with the section\\n{new}inserted before '
             'the first release; other lines must not change')
print(f'{version} is the newest release in CHANGELOG.md')
"""

CHANGELOG = Task(
    name="changelog",
    title="Add a release to a changelog (the first try fails its check)",
    params_model=ChangelogParams,
    instruction=lambda p: (
        f"Add a release section '## {p.version} - {p.date}' with the single bullet "
        f"'- {p.entry}' (a blank line between heading and bullet) to CHANGELOG.md. "
        "Keep the existing sections unchanged."
    ),
    check=lambda p: python_check(
        CHANGELOG_CHECK, p.version, p.date, p.entry, template_text("changelog", "CHANGELOG.md")
    ),
    plan=_changelog_plan,
    template="changelog",
    policy=EDITS_AUTO,
    kind="edit",
)


# -- replace_word ------------------------------------------------------------------------------

WORD = "colour"
WORD_FILES = ("README.md", "docs/guide.md")


class ReplaceWordParams(BaseModel):
    new: str = Field("color", pattern=r"^[a-z]{2,20}$", description=f"Replaces {WORD!r}.")

    @model_validator(mode="after")
    def differs(self) -> ReplaceWordParams:
        if WORD in self.new:
            raise ValueError(f"the new word must not contain {WORD!r}")
        return self


def _replace_all(p: ReplaceWordParams, view: PlanView) -> PlannedReply:
    counts = [result_text(view, i).count(WORD) for i in range(len(WORD_FILES))]
    return reply(
        f"Replacing {counts[0]} and {counts[1]} occurrences, both files at once.",
        *(
            call("edit_file", path=path, old=WORD, new=p.new, count=n)
            for path, n in zip(WORD_FILES, counts, strict=True)
        ),
    )


def _replace_plan(p: ReplaceWordParams, view: PlanView) -> PlannedReply:
    return play(
        view,
        [
            [
                reply(
                    "Reading both files.", *(call("read_file", path=path) for path in WORD_FILES)
                ),
                lambda v: _replace_all(p, v),
                reply(f"{WORD!r} is now {p.new!r} in README.md and docs/guide.md."),
            ]
        ],
    )


REPLACE_CHECK = """
import json, sys
word, new, originals = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for path, original in originals.items():
    try:
        text = open(path).read()
    except FileNotFoundError:
        sys.exit(f'{path} does not exist')
    if word in text:
        sys.exit(f'{path} still contains {word!r} {text.count(word)} time(s)')
    if text != original.replace(word, new):
        sys.exit(f'{path} changed in more places than {word!r} -> {new!r}')
print(f'{word!r} -> {new!r} in {len(originals)} files')
"""

REPLACE_WORD = Task(
    name="replace_word",
    title="Replace a word across two files",
    params_model=ReplaceWordParams,
    instruction=lambda p: (
        f"Replace every occurrence of the word {WORD!r} with {p.new!r} in README.md and "
        "docs/guide.md. Change nothing else."
    ),
    check=lambda p: python_check(
        REPLACE_CHECK,
        WORD,
        p.new,
        json.dumps({path: template_text("replace_word", path) for path in WORD_FILES}),
    ),
    plan=_replace_plan,
    template="replace_word",
    policy=EDITS_AUTO,
    kind="edit",
)

EDIT_TASKS = (RENAME_KEY, CHANGELOG, REPLACE_WORD, FROM_TEMPLATE)
