"""Helpers of the repository loader tests (tests/test_loaders_*.py): real folders and real
git repositories, no mocks.

Every test module of the loader sets `pytestmark = NEEDS_GIT`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ontology import Document, Element
from uda.loaders import LoadedSource, SkipReason

NEEDS_GIT = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git CLI")

REMOTE = "https://example.invalid/org/myrepo.git"


def write(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def reasons(src: LoadedSource) -> dict[str, SkipReason]:
    return {entry.path: entry.reason for entry in src.skipped}


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(  # noqa: S603 - fixed git arguments from the tests
        ["git", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args],  # noqa: S607
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", **(env or {})},
    )
    return done.stdout


def init(repo: Path, *, remote: str | None = REMOTE) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    if remote:
        git(repo, "remote", "add", "origin", remote)
    return repo


def commit(
    repo: Path,
    *paths: str,
    who: tuple[str, str] = ("Alice", "alice@example.com"),
    when: str = "2020-01-01 12:00:00 +0000",
    authored: str | None = None,
) -> None:
    git(repo, "add", "--", *(paths or (".",)))
    git(
        repo,
        "-c",
        f"user.name={who[0]}",
        "-c",
        f"user.email={who[1]}",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        f"change {paths}",
        env={"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": authored or when},
    )


def by_id(src: LoadedSource) -> dict[str, Element]:
    return {e.element_id: e for e in src.elements}


def document(src: LoadedSource, element_id: str) -> Document:
    found = by_id(src)[element_id]
    assert isinstance(found, Document)
    return found


def edges(src: LoadedSource, relation: str) -> set[tuple[str, str]]:
    return {(r.source_id, r.target_id) for r in src.relations if r.relation == relation}


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
