"""File tools over a thread's workspace: list_files, read_file, write_file, edit_file.

Every path goes through :func:`resolve_inside`; blocking file I/O runs in a worker thread so a large
file never stalls the event loop that serves streams.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.tools.base import MAX_OUTPUT_CHARS, ToolContext, ToolError, ToolSpec
from agent.tools.workspace import list_tree, open_inside, resolve_inside

LIST_LIMIT = 500
"""Most entries one list_files call returns."""
READ_BUDGET = MAX_OUTPUT_CHARS - 500
"""Characters of file text one read_file call returns, leaving room for its note."""
_SNIFF_BYTES = 8192


class ListFilesArgs(BaseModel):
    """Arguments of list_files."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(
        default=".",
        description="Directory to list, relative to the workspace root; '.' is the root.",
    )


class ReadFileArgs(BaseModel):
    """Arguments of read_file."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="File to read, relative to the workspace root.")
    offset: int = Field(default=0, ge=0, description="Number of lines to skip (0 = first line).")
    limit: int = Field(default=400, ge=1, le=2000, description="Most lines to return.")


class WriteFileArgs(BaseModel):
    """Arguments of write_file."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(
        description="File to write, relative to the workspace root; parent directories are "
        "created as needed."
    )
    content: str = Field(description="The complete text to write.")
    append: bool = Field(
        default=False, description="Add content to the end of the file instead of replacing it."
    )


class EditFileArgs(BaseModel):
    """Arguments of edit_file."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="File to edit, relative to the workspace root.")
    old: str = Field(
        min_length=1,
        description="Exact text to replace, including whitespace and indentation; include "
        "enough surrounding lines that it matches only the place you mean.",
    )
    new: str = Field(description="Text to put in its place.")
    count: int = Field(
        default=1, ge=1, description="How many occurrences to replace; all of them must be meant."
    )


def _shown(root: Path, target: Path) -> str:
    """``target`` as a workspace-relative posix path for messages."""
    return target.relative_to(root.resolve()).as_posix()


def _require_file(target: Path, shown: str) -> None:
    """Raise a ToolError unless ``target`` is an existing regular file."""
    if not target.exists():
        raise ToolError(f"File {shown!r} does not exist. Call list_files to see what is there.")
    if target.is_dir():
        raise ToolError(
            f"{shown!r} is a directory, not a file. Call list_files with path {shown!r} "
            "to see what it contains."
        )


def _require_text(target: Path, shown: str) -> None:
    """Raise a ToolError if the file looks binary (a NUL byte near its start)."""
    with target.open("rb") as f:
        if b"\0" in f.read(_SNIFF_BYTES):
            raise ToolError(
                f"File {shown!r} is binary (it contains NUL bytes); only text files can be "
                "read or edited."
            )


def _format_listing(entries: list[dict[str, Any]], shown: str) -> str:
    """One line per entry: directories end with '/', files show their size."""
    if not entries:
        return "The workspace is empty." if shown == "." else f"Directory {shown!r} is empty."
    lines = []
    for entry in entries:
        if entry["type"] == "dir":
            lines.append(f"{entry['path']}/")
        elif entry["type"] == "symlink":
            lines.append(f"{entry['path']} (symlink)")
        else:
            lines.append(f"{entry['path']} ({entry['size']} bytes)")
    if len(entries) >= LIST_LIMIT:
        lines.append(
            f"[stopped at {LIST_LIMIT} entries; there may be more. Call list_files with a "
            "subdirectory path to see the rest.]"
        )
    return "\n".join(lines)


def _list(root: Path, path: str) -> str:
    target = resolve_inside(root, path)
    try:
        entries = list_tree(root, path, limit=LIST_LIMIT)
    except FileNotFoundError:
        raise ToolError(
            f"Directory {path!r} does not exist. Call list_files with path '.' to see the "
            "workspace root."
        ) from None
    return _format_listing(entries, _shown(root, target))


def _read(root: Path, path: str, offset: int, limit: int) -> str:
    target = resolve_inside(root, path)
    shown = _shown(root, target)
    _require_file(target, shown)
    _require_text(target, shown)
    picked: list[str] = []
    size = 0
    lines_seen = 0
    next_offset: int | None = None
    note = ""
    # newline="" keeps "\r\n" as is, so the text can be copied into edit_file exactly.
    fd = open_inside(root, target, os.O_RDONLY)
    with open(fd, encoding="utf-8", errors="replace", newline="") as f:
        for index, line in enumerate(f):
            lines_seen = index + 1
            if index < offset:
                continue
            if index >= offset + limit:
                next_offset = index
                break
            if size + len(line) > READ_BUDGET:
                if not picked:  # one line longer than the budget: show its start
                    picked.append(line[:READ_BUDGET])
                    note = f"[line {index + 1} is {len(line)} characters; only its start is shown]"
                    next_offset = index + 1
                else:
                    next_offset = index
                break
            picked.append(line)
            size += len(line)
    if lines_seen == 0:
        return f"[file {shown!r} is empty]"
    if offset >= lines_seen:
        raise ToolError(
            f"offset {offset} is past the end of {shown!r}, which has {lines_seen} lines. "
            "Use a smaller offset."
        )
    text = "".join(picked)
    if next_offset is None:
        return text
    if not text.endswith("\n"):
        text += "\n"
    if note:
        text += f"{note}\n"
    return (
        f"{text}[{len(picked)} lines shown from offset {offset}; the file continues: "
        f"call read_file with offset={next_offset} to read more]"
    )


def _write(root: Path, path: str, content: str, append: bool) -> str:
    target = resolve_inside(root, path)
    shown = _shown(root, target)
    if target.is_dir():
        raise ToolError(
            f"{shown!r} is a directory. Give a file path inside it, such as '{shown}/notes.txt'."
        )
    data = content.encode("utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
        with open(open_inside(root, target, flags), "ab" if append else "wb") as f:
            if not append:
                f.truncate(0)
            f.write(data)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(
            f"Cannot write {shown!r}: part of its parent path is an existing file, not a "
            "directory. Choose another path."
        ) from None
    return f"{'Appended' if append else 'Wrote'} {len(data)} bytes to {shown}"


def _edit(root: Path, path: str, old: str, new: str, count: int) -> str:
    target = resolve_inside(root, path)
    shown = _shown(root, target)
    _require_file(target, shown)
    _require_text(target, shown)
    with open(open_inside(root, target, os.O_RDONLY), "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # Decoding with replacement and writing back would corrupt the file.
        raise ToolError(
            f"File {shown!r} is not valid UTF-8 text, so edit_file cannot change it safely. "
            "Use write_file to replace it whole."
        ) from None
    found = text.count(old)
    if found == 0:
        raise ToolError(
            f"The text given as old was not found in {shown!r}. Call read_file to see its "
            "current content, then copy the exact text to replace (including whitespace "
            "and indentation)."
        )
    if found > count:
        raise ToolError(
            f"The text given as old occurs {found} times in {shown!r}, but count is {count}. "
            "Include more surrounding lines in old so it matches only the place you mean, "
            f"or set count={found} to replace every occurrence."
        )
    with open(open_inside(root, target, os.O_WRONLY), "wb") as f:
        f.truncate(0)
        f.write(text.replace(old, new).encode("utf-8"))
    return f"Replaced {found} occurrence{'' if found == 1 else 's'} in {shown}"


async def list_files(ctx: ToolContext, args: ListFilesArgs) -> str:
    """Tool body of list_files."""
    return await asyncio.to_thread(_list, ctx.workspace, args.path)


async def read_file(ctx: ToolContext, args: ReadFileArgs) -> str:
    """Tool body of read_file."""
    return await asyncio.to_thread(_read, ctx.workspace, args.path, args.offset, args.limit)


async def write_file(ctx: ToolContext, args: WriteFileArgs) -> str:
    """Tool body of write_file."""
    return await asyncio.to_thread(_write, ctx.workspace, args.path, args.content, args.append)


async def edit_file(ctx: ToolContext, args: EditFileArgs) -> str:
    """Tool body of edit_file."""
    return await asyncio.to_thread(_edit, ctx.workspace, args.path, args.old, args.new, args.count)


def file_tools() -> list[ToolSpec]:
    """The four file tools: list_files, read_file, write_file, edit_file."""
    return [
        ToolSpec(
            name="list_files",
            description="List the files and directories under a workspace directory, "
            "recursively: one per line, directories ending with '/', files with their size.",
            args_schema=ListFilesArgs,
            read_only=True,
            run=list_files,
        ),
        ToolSpec(
            name="read_file",
            description="Read a text file from the workspace. Returns its raw text (no line "
            "numbers) from line `offset`, at most `limit` lines; a note at the end says how "
            "to read more when the file continues.",
            args_schema=ReadFileArgs,
            read_only=True,
            run=read_file,
        ),
        ToolSpec(
            name="write_file",
            description="Create or overwrite a text file in the workspace (or append to it). "
            "Parent directories are created as needed.",
            args_schema=WriteFileArgs,
            read_only=False,
            run=write_file,
        ),
        ToolSpec(
            name="edit_file",
            description="Replace exact text in a workspace file. `old` must match the file "
            "exactly and occur no more than `count` times; read the file first.",
            args_schema=EditFileArgs,
            read_only=False,
            run=edit_file,
        ),
    ]
