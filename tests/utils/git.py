"""A real git repository in a thread's workspace, for the tests of the git MCP server."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def git_repo(repo: Path) -> Path:
    """A repository with one commit and an untracked ``b.txt``."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "initial")
    (repo / "b.txt").write_text("two\n")
    return repo


def commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))
