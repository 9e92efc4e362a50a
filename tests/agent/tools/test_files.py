"""The file tools, called the way the graph calls them: through execute_tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent.tools import ToolContext, ToolResult, ToolSpec, default_tools, execute_tool
from agent.tools.files import READ_BUDGET, file_tools

TOOLS = {tool.name: tool for tool in file_tools()}


async def call(ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    return await execute_tool(TOOLS[name], ctx, args)


def test_default_tools_order_and_read_only_flags() -> None:
    tools = default_tools()
    assert [t.name for t in tools] == [
        "list_files",
        "read_file",
        "write_file",
        "edit_file",
        "run_command",
    ]
    assert [t.read_only for t in tools] == [True, True, False, False, False]


@pytest.mark.parametrize(
    ("name", "required", "optional"),
    [
        ("list_files", set(), {"path"}),
        ("read_file", {"path"}, {"offset", "limit"}),
        ("write_file", {"path", "content"}, {"append"}),
        ("edit_file", {"path", "old", "new"}, {"count"}),
        ("run_command", {"command"}, {"timeout"}),
    ],
)
def test_openai_schema_names_the_function_and_its_required_params(
    name: str, required: set[str], optional: set[str]
) -> None:
    tool = next(t for t in default_tools() if t.name == name)
    schema = tool.openai_schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == name
    assert function["description"] == tool.description
    params = function["parameters"]
    assert set(params.get("required", [])) == required
    assert set(params["properties"]) == required | optional
    assert all(p.get("description") for p in params["properties"].values())


async def test_write_then_read_round_trip(ctx: ToolContext) -> None:
    result = await call(ctx, "write_file", path="src/app.py", content="print('hi')\n")
    assert result == ToolResult(ok=True, content="Wrote 12 bytes to src/app.py")
    assert (ctx.workspace / "src" / "app.py").read_text() == "print('hi')\n"
    read = await call(ctx, "read_file", path="src/app.py")
    assert read == ToolResult(ok=True, content="print('hi')\n")


async def test_write_file_append(ctx: ToolContext) -> None:
    await call(ctx, "write_file", path="log.txt", content="one\n")
    result = await call(ctx, "write_file", path="log.txt", content="two\n", append=True)
    assert result == ToolResult(ok=True, content="Appended 4 bytes to log.txt")
    assert (ctx.workspace / "log.txt").read_text() == "one\ntwo\n"


async def test_write_file_counts_bytes_not_characters(ctx: ToolContext) -> None:
    result = await call(ctx, "write_file", path="u.txt", content="é")
    assert result.content == "Wrote 2 bytes to u.txt"


async def test_write_file_onto_a_directory_is_an_error(ctx: ToolContext) -> None:
    (ctx.workspace / "src").mkdir()
    result = await call(ctx, "write_file", path="src", content="x")
    assert not result.ok
    assert "is a directory" in result.content


async def test_write_file_under_an_existing_file_is_an_error(ctx: ToolContext) -> None:
    (ctx.workspace / "plain").write_text("x")
    result = await call(ctx, "write_file", path="plain/child.txt", content="x")
    assert not result.ok
    assert "existing file" in result.content


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a\0b", ""])
async def test_every_file_tool_refuses_hostile_paths(ctx: ToolContext, path: str) -> None:
    results = [
        await call(ctx, "list_files", path=path),
        await call(ctx, "read_file", path=path),
        await call(ctx, "write_file", path=path, content="pwned"),
        await call(ctx, "edit_file", path=path, old="root", new="pwned"),
    ]
    for result in results:
        assert not result.ok
        assert "workspace" in result.content or "relative path" in result.content
    assert not (ctx.workspace.parent / "x").exists()


async def test_symlinked_file_pointing_out_is_neither_read_nor_written(
    ctx: ToolContext, outside: Path
) -> None:
    (ctx.workspace / "link.txt").symlink_to(outside / "secret.txt")
    read = await call(ctx, "read_file", path="link.txt")
    assert not read.ok
    assert "top secret" not in read.content
    assert "outside the workspace" in read.content
    write = await call(ctx, "write_file", path="link.txt", content="pwned")
    edit = await call(ctx, "edit_file", path="link.txt", old="top", new="pwned")
    assert not write.ok and not edit.ok
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_symlinked_dir_pointing_out_is_not_entered(ctx: ToolContext, outside: Path) -> None:
    (ctx.workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    write = await call(ctx, "write_file", path="linkdir/new.txt", content="pwned")
    assert not write.ok
    assert not (outside / "new.txt").exists()
    listed = await call(ctx, "list_files", path="linkdir")
    assert not listed.ok
    root_listing = await call(ctx, "list_files")
    assert root_listing.ok
    assert root_listing.content == "linkdir (symlink)"


async def test_list_files_format(ctx: ToolContext) -> None:
    (ctx.workspace / "src").mkdir()
    (ctx.workspace / "src" / "app.py").write_text("x = 1\n")
    (ctx.workspace / "notes.txt").write_text("hello")
    result = await call(ctx, "list_files")
    assert result == ToolResult(ok=True, content="notes.txt (5 bytes)\nsrc/\nsrc/app.py (6 bytes)")


async def test_list_files_empty_and_missing(ctx: ToolContext) -> None:
    empty = await call(ctx, "list_files")
    assert empty == ToolResult(ok=True, content="The workspace is empty.")
    missing = await call(ctx, "list_files", path="nope")
    assert not missing.ok
    assert "does not exist" in missing.content


async def test_list_files_says_when_it_stops(ctx: ToolContext) -> None:
    for i in range(501):
        (ctx.workspace / f"f{i:03}.txt").write_text("")
    result = await call(ctx, "list_files")
    assert result.ok
    lines = result.content.splitlines()
    assert len(lines) == 501
    assert "stopped at 500 entries" in lines[-1]


async def test_read_file_missing_suggests_list_files(ctx: ToolContext) -> None:
    result = await call(ctx, "read_file", path="missing.txt")
    assert result == ToolResult(
        ok=False,
        content="File 'missing.txt' does not exist. Call list_files to see what is there.",
    )


async def test_read_file_of_directory_is_an_error(ctx: ToolContext) -> None:
    (ctx.workspace / "src").mkdir()
    result = await call(ctx, "read_file", path="src")
    assert not result.ok
    assert "directory" in result.content and "list_files" in result.content


async def test_read_file_refuses_binary(ctx: ToolContext) -> None:
    (ctx.workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    result = await call(ctx, "read_file", path="blob.bin")
    assert not result.ok
    assert "binary" in result.content


async def test_read_file_offset_and_limit_return_raw_lines(ctx: ToolContext) -> None:
    (ctx.workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    result = await call(ctx, "read_file", path="n.txt", offset=2, limit=3)
    assert result.ok
    body, note = result.content.rsplit("\n", 1)
    assert body == "line 2\nline 3\nline 4"
    assert "offset=5" in note
    last = await call(ctx, "read_file", path="n.txt", offset=8)
    assert last == ToolResult(ok=True, content="line 8\nline 9\n")


async def test_read_file_preserves_crlf(ctx: ToolContext) -> None:
    (ctx.workspace / "w.txt").write_bytes(b"a\r\nb\r\n")
    result = await call(ctx, "read_file", path="w.txt")
    assert result.content == "a\r\nb\r\n"


async def test_read_file_offset_past_end_and_empty_file(ctx: ToolContext) -> None:
    (ctx.workspace / "n.txt").write_text("a\nb\n")
    past = await call(ctx, "read_file", path="n.txt", offset=5)
    assert not past.ok
    assert "has 2 lines" in past.content
    (ctx.workspace / "empty.txt").write_text("")
    empty = await call(ctx, "read_file", path="empty.txt")
    assert empty.ok
    assert "empty" in empty.content


async def test_read_file_stays_within_the_output_budget(ctx: ToolContext) -> None:
    (ctx.workspace / "wide.txt").write_text(("y" * 99 + "\n") * 1000)
    result = await call(ctx, "read_file", path="wide.txt")
    assert result.ok
    assert "characters cut" not in result.content  # not cut in the middle by execute_tool
    shown = result.content.count("y" * 99)
    assert shown == READ_BUDGET // 100
    assert f"offset={shown}" in result.content


async def test_read_file_shows_start_of_an_overlong_line(ctx: ToolContext) -> None:
    (ctx.workspace / "min.js").write_text("z" * (READ_BUDGET * 2) + "\nnext\n")
    result = await call(ctx, "read_file", path="min.js")
    assert result.ok
    assert result.content.startswith("z" * READ_BUDGET + "\n")
    assert "only its start is shown" in result.content
    assert "offset=1" in result.content


async def test_edit_file_replaces_exact_text(ctx: ToolContext) -> None:
    (ctx.workspace / "app.py").write_text("def f():\n    return 1\n")
    result = await call(ctx, "edit_file", path="app.py", old="return 1", new="return 2")
    assert result == ToolResult(ok=True, content="Replaced 1 occurrence in app.py")
    assert (ctx.workspace / "app.py").read_text() == "def f():\n    return 2\n"


async def test_edit_file_not_found_suggests_read_file(ctx: ToolContext) -> None:
    (ctx.workspace / "app.py").write_text("x = 1\n")
    result = await call(ctx, "edit_file", path="app.py", old="y = 1", new="y = 2")
    assert not result.ok
    assert "not found" in result.content and "read_file" in result.content
    assert (ctx.workspace / "app.py").read_text() == "x = 1\n"


async def test_edit_file_ambiguous_asks_for_context_or_count(ctx: ToolContext) -> None:
    (ctx.workspace / "app.py").write_text("x = 1\nx = 1\n")
    result = await call(ctx, "edit_file", path="app.py", old="x = 1", new="x = 2")
    assert not result.ok
    assert "occurs 2 times" in result.content and "count=2" in result.content
    assert (ctx.workspace / "app.py").read_text() == "x = 1\nx = 1\n"
    both = await call(ctx, "edit_file", path="app.py", old="x = 1", new="x = 2", count=2)
    assert both == ToolResult(ok=True, content="Replaced 2 occurrences in app.py")
    assert (ctx.workspace / "app.py").read_text() == "x = 2\nx = 2\n"


async def test_edit_file_missing_file(ctx: ToolContext) -> None:
    result = await call(ctx, "edit_file", path="nope.py", old="a", new="b")
    assert not result.ok
    assert "does not exist" in result.content


async def test_edit_file_refuses_non_utf8_without_touching_it(ctx: ToolContext) -> None:
    (ctx.workspace / "latin1.txt").write_bytes(b"caf\xe9 x\n")
    result = await call(ctx, "edit_file", path="latin1.txt", old="x", new="y")
    assert not result.ok
    assert "UTF-8" in result.content
    assert (ctx.workspace / "latin1.txt").read_bytes() == b"caf\xe9 x\n"


@pytest.mark.parametrize(
    ("name", "args", "bad_arg"),
    [
        ("read_file", {"path": "a.txt", "offset": "abc"}, "offset"),
        ("read_file", {"path": "a.txt", "limit": 0}, "limit"),
        ("read_file", {}, "path"),
        ("write_file", {"path": "a.txt", "content": 42}, "content"),
        ("write_file", {"path": "a.txt", "content": "x", "mode": "w"}, "mode"),
        ("edit_file", {"path": "a.txt", "old": "", "new": "x"}, "old"),
        ("edit_file", {"path": "a.txt", "old": "a", "new": "b", "count": 0}, "count"),
        ("list_files", {"path": ["a"]}, "path"),
    ],
)
async def test_invalid_arguments_name_the_argument(
    ctx: ToolContext, name: str, args: dict[str, Any], bad_arg: str
) -> None:
    result = await execute_tool(TOOLS[name], ctx, args)
    assert not result.ok
    assert result.content.startswith(f"Invalid arguments for {name}: {bad_arg}")


class _NoArgs(BaseModel):
    pass


async def test_unexpected_exception_becomes_an_error_result(ctx: ToolContext) -> None:
    async def broken(ctx: ToolContext, args: Any) -> str:
        raise RuntimeError("disk on fire")

    tool = ToolSpec(
        name="broken", description="Always fails.", args_schema=_NoArgs, read_only=True, run=broken
    )
    result = await execute_tool(tool, ctx, {})
    assert not result.ok
    assert "broken failed unexpectedly" in result.content
    assert "RuntimeError: disk on fire" in result.content
