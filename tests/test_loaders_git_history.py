"""The repository loader's use of git history: authors per file, last-commit timestamps, and
a repository without commits. Helpers in loaders_fixtures.py.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from loaders_fixtures import NEEDS_GIT, by_id, commit, document, edges, git, init, utc, write

from ontology import Decision, Document, Person
from uda.loaders import load_repository

pytestmark = NEEDS_GIT


# -- git authors and timestamps ------------------------------------------------------------


def test_authors_per_file_and_last_commit_timestamps(tmp_path: Path) -> None:
    repo = init(tmp_path / "hist")
    alice = ("Alice", "alice@example.com")
    bob = ("Bob Builder", "Bob@Example.COM")
    write(repo, "shared.md", "# Shared\n")
    write(repo, "alone.md", "# Alone\n")
    write(repo, "docs/adr/0001-x.md", "# 1. X\n\nStatus: accepted\n")
    commit(repo, who=alice, when="2020-01-01 10:00:00 +0000")
    write(repo, "shared.md", "# Shared\n\nMore.\n")
    # The committer date counts, not the author date.
    commit(
        repo,
        "shared.md",
        who=bob,
        when="2021-06-01 08:30:00 +0200",
        authored="2019-01-01 00:00:00 +0000",
    )
    write(repo, "docs/adr/0001-x.md", "# 1. X\n\nStatus: accepted\n\nAmended.\n")
    commit(repo, "docs/adr/0001-x.md", who=bob, when="2022-02-02 02:02:02 +0000")
    write(repo, "gone.md", "# Gone\n")
    commit(repo, "gone.md", who=("Carol", "carol@example.com"), when="2022-03-03 00:00:00 +0000")
    git(repo, "rm", "-q", "gone.md")
    commit(repo, who=alice, when="2022-04-04 00:00:00 +0000")

    src = load_repository(repo)
    elements = by_id(src)
    assert edges(src, "authoredBy") == {
        ("myrepo:shared.md", "person:alice@example.com"),
        ("myrepo:shared.md", "person:bob@example.com"),
        ("myrepo:alone.md", "person:alice@example.com"),
        ("myrepo:docs/adr/0001-x.md", "person:alice@example.com"),
        ("myrepo:docs/adr/0001-x.md", "person:bob@example.com"),
    }
    persons = [e for e in src.elements if isinstance(e, Person)]
    # Carol only touched a deleted file: no element of hers is loaded, so no Person either.
    assert [(p.element_id, p.name, p.email) for p in persons] == [
        ("person:alice@example.com", "Alice", "alice@example.com"),
        ("person:bob@example.com", "Bob Builder", "bob@example.com"),
    ]
    assert "myrepo:gone.md" not in elements
    timestamps = {e.uri: e.timestamp for e in src.elements if isinstance(e, Document | Decision)}
    assert timestamps == {
        "shared.md": utc("2021-06-01T06:30:00"),
        "alone.md": utc("2020-01-01T10:00:00"),
        "docs/adr/0001-x.md": utc("2022-02-02T02:02:02"),
    }
    assert all(t.tzinfo is not None for t in timestamps.values())
    assert src.repository.timestamp == utc("2022-02-02T02:02:02")


def test_repository_without_commits(tmp_path: Path) -> None:
    repo = init(tmp_path / "fresh")
    path = write(repo, "a.md", "# A\n")
    os.utime(path, (1_500_000_000, 1_500_000_000))
    src = load_repository(repo)
    assert document(src, "myrepo:a.md").timestamp == datetime.fromtimestamp(1_500_000_000, UTC)
    assert not [e for e in src.elements if isinstance(e, Person)]
