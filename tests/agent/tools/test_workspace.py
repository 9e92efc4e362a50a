"""Workspace directories, path containment and tree listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools import (
    ToolError,
    WorkspacePathError,
    ensure_workspace,
    list_tree,
    resolve_inside,
    workspace_dir,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()


def test_workspace_dir_is_under_data_dir_and_not_created(tmp_path: Path) -> None:
    path = workspace_dir(tmp_path, "3f2b9c1e-aaaa-bbbb-cccc-0123456789ab")
    assert path == tmp_path / "workspaces" / "3f2b9c1e-aaaa-bbbb-cccc-0123456789ab"
    assert not path.exists()


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "a\\b", "x\0y", "/etc", ".hidden"])
def test_workspace_dir_rejects_unsafe_thread_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="Thread id"):
        workspace_dir(tmp_path, bad)


def test_ensure_workspace_creates_and_resolves(tmp_path: Path) -> None:
    path = ensure_workspace(tmp_path / "data", "thread-1")
    assert path.is_dir()
    assert path == (tmp_path / "data" / "workspaces" / "thread-1").resolve()
    assert ensure_workspace(tmp_path / "data", "thread-1") == path  # idempotent


@pytest.mark.parametrize(
    ("user_path", "expected"),
    [
        ("notes.txt", "notes.txt"),
        ("src/app.py", "src/app.py"),
        ("./src/../notes.txt", "notes.txt"),
        ("a/../b.txt", "b.txt"),
    ],
)
def test_resolve_inside_accepts_relative_paths(root: Path, user_path: str, expected: str) -> None:
    assert resolve_inside(root, user_path) == root / expected


def test_resolve_inside_dot_is_the_root(root: Path) -> None:
    assert resolve_inside(root, ".") == root


@pytest.mark.parametrize(
    ("user_path", "phrase"),
    [
        ("../x", "outside the workspace"),
        ("a/../../x", "outside the workspace"),
        ("..", "outside the workspace"),
        ("/etc/passwd", "absolute"),
        ("", "empty"),
        ("a\0b", "NUL"),
    ],
)
def test_resolve_inside_rejects_hostile_paths(root: Path, user_path: str, phrase: str) -> None:
    with pytest.raises(WorkspacePathError, match=phrase) as info:
        resolve_inside(root, user_path)
    assert isinstance(info.value, ToolError)  # so tools report it to the model as is
    assert "relative to the workspace root" in str(info.value) or "relative path" in str(info.value)


def test_resolve_inside_rejects_symlinked_file_pointing_out(root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(WorkspacePathError, match="outside the workspace"):
        resolve_inside(root, "link.txt")


def test_resolve_inside_rejects_path_through_symlinked_dir(root: Path, outside: Path) -> None:
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspacePathError, match="outside the workspace"):
        resolve_inside(root, "linkdir/secret.txt")
    with pytest.raises(WorkspacePathError, match="outside the workspace"):
        resolve_inside(root, "linkdir/not-yet-created.txt")


def test_resolve_inside_rejects_dangling_symlink_pointing_out(root: Path, outside: Path) -> None:
    (root / "dangling").symlink_to(outside / "missing.txt")
    with pytest.raises(WorkspacePathError, match="outside the workspace"):
        resolve_inside(root, "dangling")


def test_resolve_inside_allows_symlink_within_workspace(root: Path) -> None:
    (root / "real.txt").write_text("x")
    (root / "alias.txt").symlink_to(root / "real.txt")
    assert resolve_inside(root, "alias.txt") == root / "real.txt"


def test_resolve_inside_rejects_sibling_with_common_prefix(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "ws2").mkdir()
    with pytest.raises(WorkspacePathError):
        resolve_inside(ws, "../ws2/x")


def test_resolve_inside_reports_symlink_loop(root: Path) -> None:
    (root / "loop").symlink_to(root / "loop")
    with pytest.raises(WorkspacePathError):
        resolve_inside(root, "loop/x")


def test_list_tree_lists_recursively_sorted_with_types_and_sizes(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("print(1)\n")
    (root / "notes.txt").write_text("hello")
    (root / "src-old").mkdir()
    assert list_tree(root) == [
        {"path": "notes.txt", "type": "file", "size": 5},
        {"path": "src", "type": "dir", "size": 0},
        {"path": "src/pkg", "type": "dir", "size": 0},
        {"path": "src/pkg/mod.py", "type": "file", "size": 9},
        {"path": "src-old", "type": "dir", "size": 0},
    ]


def test_list_tree_lists_symlinks_without_following_them(root: Path, outside: Path) -> None:
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "link.txt").symlink_to(outside / "secret.txt")
    entries = list_tree(root)
    assert [(e["path"], e["type"]) for e in entries] == [
        ("link.txt", "symlink"),
        ("linkdir", "symlink"),
    ]
    assert not any("secret" in e["path"] for e in entries)


def test_list_tree_of_subdirectory_uses_root_relative_paths(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "c.txt").write_text("c")
    (root / "top.txt").write_text("t")
    assert [e["path"] for e in list_tree(root, "a")] == ["a/b", "a/b/c.txt"]


def test_list_tree_respects_limit_keeping_shallow_entries(root: Path) -> None:
    deep = root / "d1" / "d2" / "d3"
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("x")
    for i in range(5):
        (root / f"f{i}.txt").write_text("x")
    entries = list_tree(root, limit=6)
    assert len(entries) == 6
    paths = {e["path"] for e in entries}
    assert {f"f{i}.txt" for i in range(5)} <= paths
    assert "d1/d2/d3/deep.txt" not in paths


def test_list_tree_rejects_outside_and_missing(root: Path) -> None:
    with pytest.raises(WorkspacePathError):
        list_tree(root, "../")
    with pytest.raises(FileNotFoundError):
        list_tree(root, "nope")


def test_list_tree_of_a_file_lists_that_file(root: Path) -> None:
    (root / "one.txt").write_text("abc")
    assert list_tree(root, "one.txt") == [{"path": "one.txt", "type": "file", "size": 3}]


def test_open_inside_refuses_a_path_swapped_after_the_check(tmp_path: Path) -> None:
    """A sandboxed command can swap a checked path for a symlink before the server opens it: the
    last component (O_NOFOLLOW) and a swapped parent (the descriptor's real path) are caught."""
    import os
    import shutil

    from agent.tools.workspace import open_inside

    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("mine\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("secret\n")
    target = resolve_inside(root, "sub/f.txt")
    fd = open_inside(root, target, os.O_RDONLY)
    os.close(fd)

    (root / "sub" / "f.txt").unlink()
    (root / "sub" / "f.txt").symlink_to(outside / "f.txt")
    with pytest.raises(WorkspacePathError, match="symbolic link"):
        open_inside(root, target, os.O_WRONLY)

    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(outside)
    with pytest.raises(WorkspacePathError, match="outside the workspace"):
        open_inside(root, target, os.O_WRONLY)
    assert (outside / "f.txt").read_text() == "secret\n"
