"""The repository loader on real folders and real git repositories (no mocks)."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from ontology import (
    Decision,
    DecisionStatus,
    Document,
    Element,
    Person,
    Repository,
    Sensitivity,
)
from uda.errors import ConfigError, InvalidElementError
from uda.loaders import LoadedSource, SkipReason, load_repository
from uda.loaders.policy import glob_pattern

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git CLI")

ROOT = Path(__file__).resolve().parent.parent
REMOTE = "https://example.invalid/org/myrepo.git"


# -- helpers ------------------------------------------------------------------------------


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


# -- repository, ids, names -----------------------------------------------------------------


def test_git_repository_named_after_origin_remote(tmp_path: Path) -> None:
    repo = init(tmp_path / "checkout")
    write(repo, "README.md", "# My repo\n\nHello.\n")
    commit(repo)
    src = load_repository(repo)
    assert isinstance(src.repository, Repository)
    assert src.repository.element_id == "repo:myrepo"
    assert src.repository.name == "myrepo"
    assert src.repository.url == REMOTE
    assert src.id_prefix == "myrepo:"
    assert src.repository in src.elements
    readme = by_id(src)["myrepo:README.md"]
    assert isinstance(readme, Document)
    assert readme.uri == "README.md"
    assert ("myrepo:README.md", "repo:myrepo") in edges(src, "partOf")


def test_folder_name_without_remote_or_without_git(tmp_path: Path) -> None:
    plain = tmp_path / "plainfolder"
    write(plain, "notes.txt", "some notes\n")
    src = load_repository(plain)
    assert src.repository.element_id == "repo:plainfolder"
    assert src.repository.url is None
    assert [e.element_id for e in src.elements if isinstance(e, Document)] == [
        "plainfolder:notes.txt"
    ]

    local = init(tmp_path / "localrepo", remote=None)
    write(local, "a.md", "text\n")
    commit(local)
    src = load_repository(local)
    assert src.repository.element_id == "repo:localrepo"
    assert src.id_prefix == "localrepo:"


def test_remote_credentials_never_reach_the_url(tmp_path: Path) -> None:
    repo = init(tmp_path / "r", remote="https://bot:s3cret@example.invalid/org/tokened.git")
    write(repo, "a.md", "text\n")
    src = load_repository(repo)
    assert src.repository.name == "tokened"
    assert src.repository.url == "https://example.invalid/org/tokened.git"


def test_scp_style_remote(tmp_path: Path) -> None:
    repo = init(tmp_path / "r", remote="git@example.invalid:org/scp-name.git")
    write(repo, "a.md", "text\n")
    assert load_repository(repo).repository.name == "scp-name"


# -- documents ------------------------------------------------------------------------------


def test_documents_names_and_text(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    write(root, "guide.md", "Intro\n\n```sh\n# not a title\n```\n\n# The Guide #\n\nBody.\n")
    write(root, "setext.markdown", "Setext Title\n============\n\nBody.\n")
    write(root, "manual.rst", "=======\nManual\n=======\n\nBody text.\n")
    write(root, "plain.txt", "# looks like a heading but this is plain text\n")
    write(root, "README", "A readme without extension.\n")
    write(root, "LICENSE", "Permission is granted.\n")
    write(root, "untitled.md", "No heading here.\r\nSecond line.\r\n")
    write(root, "titled.md", "---\ntitle: From Front Matter\n---\n# Heading\n\nBody.\n")
    src = load_repository(root)
    docs = {e.uri: e for e in src.elements if isinstance(e, Document)}
    assert docs["guide.md"].name == "The Guide"
    assert docs["setext.markdown"].name == "Setext Title"
    assert docs["manual.rst"].name == "Manual"
    assert docs["plain.txt"].name == "plain.txt"
    assert docs["README"].name == "README"
    assert docs["LICENSE"].text == "Permission is granted.\n"
    assert docs["untitled.md"].name == "untitled.md"
    assert docs["untitled.md"].text == "No heading here.\nSecond line.\n"
    assert docs["titled.md"].name == "From Front Matter"
    assert docs["titled.md"].text == "# Heading\n\nBody.\n"
    assert all(d.element_id == f"docs:{d.uri}" for d in docs.values())


def test_skipped_files_and_folders_with_reasons(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(root, "ok.md", "# Ok\n")
    write(root, ".hidden/secret.md", "# hidden\n")
    write(root, ".git-like/x.md", "# hidden\n")
    write(root, "node_modules/pkg/README.md", "# dependency\n")
    write(root, "pkg/__pycache__/notes.txt", "cache\n")
    write(root, "env/pyvenv.cfg", "home = /usr\n")
    write(root, "env/lib/LICENSE.txt", "a venv's file\n")
    write(root, ".env", "TOKEN=x\n")
    write(root, "binary.md", b"# title\n\x00\x01\x02 binary")
    write(root, "huge.txt", "word " * 220_000)  # 1.1 MB
    write(root, "blank.md", "   \n\n\t\n")
    write(root, "only-front-matter.md", "---\nsensitivity: public\n---\n\n")
    write(root, "latin1.txt", "caf\xe9 cr\xe8me".encode("latin-1"))
    write(root, "picture.png", b"\x89PNG\r\n\x1a\n")
    write(root, "code.py", "print('hi')\n")
    (root / "link.md").symlink_to(root / "ok.md")
    src = load_repository(root)
    assert reasons(src) == {
        ".env": "hidden-file",
        ".git-like": "hidden-folder",
        ".hidden": "hidden-folder",
        "binary.md": "binary",
        "blank.md": "empty",
        "code.py": "source-code",
        "env": "virtual-environment",
        "huge.txt": "too-big",
        "latin1.txt": "not-utf8",
        "link.md": "symlink",
        "node_modules": "excluded-folder",
        "only-front-matter.md": "empty",
        "picture.png": "unsupported-type",
        "pkg/__pycache__": "excluded-folder",
    }
    details = {entry.path: entry.detail for entry in src.skipped}
    assert details["huge.txt"] == "1,100,000 bytes > 1,048,576"
    assert details["binary.md"] == "a NUL byte at offset 8"
    assert details["latin1.txt"] == "byte 0xe9 at offset 3 is not UTF-8"
    assert "outside the folder" in details["link.md"]
    assert [e.uri for e in src.elements if isinstance(e, Document)] == ["ok.md"]


def test_include_code_loads_source_files(tmp_path: Path) -> None:
    root = tmp_path / "code"
    write(root, "app.py", "# Not a title\nprint('hi')\n")
    write(root, "pyproject.toml", "[project]\nname = 'x'\n")
    write(root, "Makefile", "all:\n\techo hi\n")
    write(root, "README.md", "# Readme\n")
    without = load_repository(root)
    assert {e.uri for e in without.elements if isinstance(e, Document)} == {"README.md"}
    with_code = load_repository(root, include_code=True)
    docs = {e.uri: e for e in with_code.elements if isinstance(e, Document)}
    assert set(docs) == {"README.md", "app.py", "pyproject.toml", "Makefile"}
    assert docs["app.py"].name == "app.py"  # a comment is not a heading
    assert docs["app.py"].text == "# Not a title\nprint('hi')\n"
    assert not with_code.skipped


def test_gitignore_respected_and_untracked_files_loaded(tmp_path: Path) -> None:
    repo = init(tmp_path / "r")
    write(repo, ".gitignore", "build/\n*.log.md\nprivate.md\n")
    write(repo, "kept.md", "# Kept\n")
    write(repo, "build/out.md", "# Generated\n")
    write(repo, "debug.log.md", "# Log\n")
    write(repo, "private.md", "# Private\n")
    commit(repo)
    untracked = write(repo, "draft.md", "# Draft\n")
    os.utime(untracked, (1_600_000_000, 1_600_000_000))
    src = load_repository(repo)
    docs = {e.uri: e for e in src.elements if isinstance(e, Document)}
    assert set(docs) == {"kept.md", "draft.md"}
    assert docs["draft.md"].timestamp == datetime.fromtimestamp(1_600_000_000, UTC)
    assert not [s for s, _ in edges(src, "authoredBy") if s == "myrepo:draft.md"]
    # What git's excludes leave out is accounted for too: a folder once, not file by file.
    assert reasons(src) == {
        ".gitignore": "hidden-file",
        "build": "ignored-by-git",
        "debug.log.md": "ignored-by-git",
        "private.md": "ignored-by-git",
    }
    build = next(entry for entry in src.skipped if entry.path == "build")
    assert ".gitignore" in build.detail


def test_subfolder_of_a_git_repository(tmp_path: Path) -> None:
    repo = init(tmp_path / "r")
    write(repo, "top.md", "# Top\n")
    write(repo, "docs/inner.md", "# Inner\n")
    commit(repo, when="2021-03-04 05:06:07 +0000")
    src = load_repository(repo / "docs")
    # Ids stay relative to the top of the working tree; the prefix covers only the subfolder.
    assert src.repository.element_id == "repo:myrepo"
    assert src.id_prefix == "myrepo:docs/"
    docs = [e for e in src.elements if isinstance(e, Document)]
    assert [(d.element_id, d.uri) for d in docs] == [("myrepo:docs/inner.md", "docs/inner.md")]
    assert docs[0].timestamp == utc("2021-03-04T05:06:07")
    assert edges(src, "authoredBy") == {("myrepo:docs/inner.md", "person:alice@example.com")}


# -- decision records -----------------------------------------------------------------------

NYGARD = """# 3. Use PostgreSQL for the system of record

Date: 2020-01-15

## Status

Accepted

## Context

We need a relational store.
"""

MADR_FRONT_MATTER = """---
status: Proposed
date: 2021-02-03
deciders: [alice, bob]
---
# Use Markdown Architectural Decision Records

## Context and Problem Statement

How do we record decisions?
"""

MADR_BULLETS = """# Use plain JUnit5 for advanced test assertions

* Status: rejected
* Deciders: Alice
* Date: 2019-05-06

Technical Story: assertions are hard to read.
"""


def test_nygard_and_madr_records_become_decisions(tmp_path: Path) -> None:
    root = tmp_path / "adrs"
    write(root, "docs/adr/0003-use-postgresql.md", NYGARD)
    write(root, "docs/decisions/0001-use-madr.md", MADR_FRONT_MATTER)
    write(root, "adr/0002-junit.md", MADR_BULLETS)
    write(root, "decisions/4-bold.md", "# Bold\n\n**Status:** Deprecated\n\nText.\n")
    write(root, "doc/adr/0005-unknown.md", "# Unknown\n\n## Status\n\nPondering it.\n")
    write(root, "docs/architecture/decisions/0006-kep.md", "# KEP\n\nStatus: implementable\n")
    write(root, "services/billing/docs/adr/0001-nested.md", "# Nested\n\nStatus: accepted\n")
    write(root, "docs/adr/template.md", "# Template\n\nStatus: accepted\n")  # not numbered
    write(root, "notes/0001-not-a-folder-for-decisions.md", "# Note\n\nStatus: accepted\n")
    src = load_repository(root)
    decisions = {e.uri: e for e in src.elements if isinstance(e, Decision)}
    assert set(decisions) == {
        "docs/adr/0003-use-postgresql.md",
        "docs/decisions/0001-use-madr.md",
        "adr/0002-junit.md",
        "decisions/4-bold.md",
        "doc/adr/0005-unknown.md",
        "docs/architecture/decisions/0006-kep.md",
        "services/billing/docs/adr/0001-nested.md",
    }
    nygard = decisions["docs/adr/0003-use-postgresql.md"]
    assert nygard.name == "3. Use PostgreSQL for the system of record"
    assert nygard.status is DecisionStatus.ACCEPTED
    assert nygard.decided_on == date(2020, 1, 15)
    assert nygard.element_id == "adrs:docs/adr/0003-use-postgresql.md"
    madr = decisions["docs/decisions/0001-use-madr.md"]
    assert madr.name == "Use Markdown Architectural Decision Records"
    assert madr.status is DecisionStatus.PROPOSED
    assert madr.decided_on == date(2021, 2, 3)
    assert not madr.text.startswith("---")
    bullets = decisions["adr/0002-junit.md"]
    assert (bullets.status, bullets.decided_on) == (DecisionStatus.REJECTED, date(2019, 5, 6))
    assert decisions["decisions/4-bold.md"].status is DecisionStatus.DEPRECATED
    assert decisions["doc/adr/0005-unknown.md"].status is None
    assert decisions["doc/adr/0005-unknown.md"].decided_on is None
    kep = decisions["docs/architecture/decisions/0006-kep.md"]
    assert kep.status is DecisionStatus.IMPLEMENTABLE
    docs = {e.uri for e in src.elements if type(e) is Document}
    assert docs == {"docs/adr/template.md", "notes/0001-not-a-folder-for-decisions.md"}


def test_supersedes_from_either_side_without_duplicates(tmp_path: Path) -> None:
    root = tmp_path / "sup"
    adr = "docs/adr"
    # 1 -> 2 stated on both sides; 3 -> 4 only in the old record; 5 -> 6 only in the new one.
    write(
        root, f"{adr}/0001-old.md", "# 1. Old\n\n## Status\n\nSuperseded by [2. New](0002-new.md)\n"
    )
    write(
        root,
        f"{adr}/0002-new.md",
        "# 2. New\n\n## Status\n\nAccepted\n\nSupersedes [1. Old](0001-old.md)\n",
    )
    write(root, f"{adr}/0003-a.md", "# 3. A\n\n* Status: superseded by ADR-0004\n")
    write(root, f"{adr}/0004-b.md", "# 4. B\n\nStatus: accepted\n")
    write(root, f"{adr}/0005-c.md", "# 5. C\n\nStatus: deprecated\n")
    write(root, f"{adr}/0006-d.md", "# 6. D\n\nStatus: accepted\n\nSupersedes ADR 5.\n")
    src = load_repository(root)
    p = "sup:docs/adr/"
    assert edges(src, "supersedes") == {
        (f"{p}0002-new.md", f"{p}0001-old.md"),
        (f"{p}0004-b.md", f"{p}0003-a.md"),
        (f"{p}0006-d.md", f"{p}0005-c.md"),
    }
    supersedes = [r for r in src.relations if r.relation == "supersedes"]
    assert len(supersedes) == 3
    statuses = {e.uri: e.status for e in src.elements if isinstance(e, Decision)}
    assert statuses[f"{adr}/0001-old.md"] is DecisionStatus.SUPERSEDED
    assert statuses[f"{adr}/0003-a.md"] is DecisionStatus.SUPERSEDED
    # A supersede line is not also a governedBy edge.
    assert edges(src, "governedBy") == set()


def test_governed_by_links_and_mentions(tmp_path: Path) -> None:
    root = tmp_path / "gov"
    write(root, "docs/adr/0003-use-x.md", "# 3. Use X\n\nStatus: accepted\n\nAs ADR-3 says.\n")
    write(root, "docs/adr/0001-first.md", "# 1. First\n\nStatus: accepted\n")
    write(root, "docs/guide.md", "# Guide\n\nSee [the decision](adr/0003-use-x.md#consequences).\n")
    write(
        root, "README.md", "# Readme\n\nWe follow ADR 0001 and ADR-0003; ADR-99 does not exist.\n"
    )
    write(root, "notes/ref.md", "# Ref\n\nSee [the rule][x].\n\n[x]: /docs/adr/0001-first.md\n")
    write(
        root,
        "docs/other.md",
        "# Other\n\n[external](https://example.invalid/docs/adr/0001-first.md) "
        "and ADRs 1-3 mention nothing.\n",
    )
    src = load_repository(root)
    assert edges(src, "governedBy") == {
        ("gov:docs/guide.md", "gov:docs/adr/0003-use-x.md"),
        ("gov:README.md", "gov:docs/adr/0001-first.md"),
        ("gov:README.md", "gov:docs/adr/0003-use-x.md"),
        ("gov:notes/ref.md", "gov:docs/adr/0001-first.md"),
    }


def test_decision_governed_by_another_and_ambiguous_numbers(tmp_path: Path) -> None:
    root = tmp_path / "mono"
    write(root, "a/docs/adr/0001-a-one.md", "# A1\n\nStatus: accepted\n")
    write(root, "a/docs/adr/0002-a-two.md", "# A2\n\nStatus: accepted\n\nBuilds on ADR 1.\n")
    write(root, "b/docs/adr/0001-b-one.md", "# B1\n\nStatus: accepted\n")
    write(root, "README.md", "# Monorepo\n\nADR 1 is ambiguous here; ADR 2 is not.\n")
    src = load_repository(root)
    assert edges(src, "governedBy") == {
        ("mono:a/docs/adr/0002-a-two.md", "mono:a/docs/adr/0001-a-one.md"),
        ("mono:README.md", "mono:a/docs/adr/0002-a-two.md"),
    }


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


# -- sensitivity and scope ------------------------------------------------------------------

POLICY = """
[defaults]
sensitivity = "public"

[[rule]]
glob = "docs/**"
sensitivity = "confidential"

[[rule]]
glob = "docs/internal/**"
sensitivity = "restricted"
scope = "project:core"

[[rule]]
glob = "*.txt"
scope = "project:notes"
"""


def test_front_matter_beats_policy_and_last_rule_wins(tmp_path: Path) -> None:
    repo = init(tmp_path / "pol")
    write(repo, ".uda-policy.toml", POLICY)
    write(repo, "README.md", "# Readme\n")
    write(repo, "docs/guide.md", "# Guide\n")
    write(repo, "docs/internal/plan.md", "# Plan\n")
    write(repo, "docs/internal/open.md", "---\nsensitivity: Public\n---\n# Open\n")
    write(repo, "docs/internal/moved.md", "---\nscope: project:other\n---\n# Moved\n")
    write(repo, "docs/notes.txt", "notes\n")
    write(repo, "fm.md", "---\nsensitivity: restricted\nscope: project:x\n---\n# FM\n")
    commit(repo)
    src = load_repository(repo)
    got = {e.uri: (e.sensitivity, e.scope) for e in src.elements if isinstance(e, Document)}
    s = Sensitivity
    assert got == {
        "README.md": (s.INTERNAL, None),  # no rule: the document default, not [defaults]
        "docs/guide.md": (s.CONFIDENTIAL, None),
        "docs/internal/plan.md": (s.RESTRICTED, "project:core"),
        "docs/internal/open.md": (s.PUBLIC, "project:core"),
        "docs/internal/moved.md": (s.RESTRICTED, "project:other"),
        # The *.txt rule sets only a scope: it keeps the sensitivity of docs/**.
        "docs/notes.txt": (s.CONFIDENTIAL, "project:notes"),
        "fm.md": (s.RESTRICTED, "project:x"),
    }
    assert src.repository.sensitivity is s.PUBLIC
    assert all(p.sensitivity is s.PUBLIC for p in src.elements if isinstance(p, Person))
    assert reasons(src)[".uda-policy.toml"] == "hidden-file"


def test_defaults_without_policy_and_policy_argument(tmp_path: Path) -> None:
    root = tmp_path / "nopol"
    write(root, "a.md", "# A\n")
    src = load_repository(root)
    assert src.repository.sensitivity is Sensitivity.INTERNAL
    assert document(src, "nopol:a.md").sensitivity is Sensitivity.INTERNAL
    assert document(src, "nopol:a.md").scope is None
    elsewhere = write(
        tmp_path,
        "policy.toml",
        '[defaults]\nsensitivity = "confidential"\nscope = "project:p"\n'
        '[[rule]]\nglob = "a.md"\nsensitivity = "public"\n',
    )
    src = load_repository(root, policy=elsewhere)
    assert (src.repository.sensitivity, src.repository.scope) == (
        Sensitivity.CONFIDENTIAL,
        "project:p",
    )
    assert document(src, "nopol:a.md").sensitivity is Sensitivity.PUBLIC
    with pytest.raises(ConfigError, match="policy"):
        load_repository(root, policy=tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("policy", "front_matter", "field"),
    [
        ('[[rule]]\nglob = "**"\nsensitivity = "secret"\n', "", "sensitivity"),
        ('[[rule]]\nglob = "**"\nscope = "core"\n', "", "scope"),
        ('[defaults]\nsensitivity = "top"\n', "", "sensitivity"),
        ("", "---\nsensitivity: secret\n---\n", "sensitivity"),
        ("", "---\nscope: core team\n---\n", "scope"),
        ("", "---\nsensitivity: [public]\n---\n", "sensitivity"),
    ],
)
def test_invalid_values_raise_naming_file_and_field(
    tmp_path: Path, policy: str, front_matter: str, field: str
) -> None:
    root = tmp_path / "bad"
    if policy:
        write(root, ".uda-policy.toml", policy)
    write(root, "docs/page.md", front_matter + "# Page\n")
    with pytest.raises(InvalidElementError) as caught:
        load_repository(root)
    assert caught.value.field == field
    assert (".uda-policy.toml" if policy else "docs/page.md") in str(caught.value)
    assert field in str(caught.value)


def test_malformed_policy_and_front_matter(tmp_path: Path) -> None:
    root = tmp_path / "bad"
    write(root, "a.md", "# A\n")
    write(root, ".uda-policy.toml", '[[rule]]\nglob = "**"\nsensitivty = "restricted"\n')
    with pytest.raises(ConfigError, match="sensitivty"):
        load_repository(root)
    write(root, ".uda-policy.toml", "[[rule]\n")
    with pytest.raises(ConfigError):
        load_repository(root)
    (root / ".uda-policy.toml").unlink()
    write(root, "a.md", "---\nsensitivity: [restricted\n---\n# A\n")
    with pytest.raises(InvalidElementError, match=r"a\.md"):
        load_repository(root)
    # A horizontal rule around a paragraph is not front matter: the text stays whole.
    write(root, "a.md", "---\nJust a paragraph.\n---\n# A\n")
    assert document(load_repository(root), "bad:a.md").text.startswith("---")


@pytest.mark.parametrize(
    ("glob", "matching", "not_matching"),
    [
        ("docs/internal/**", ["docs/internal/a.md", "docs/internal/x/y.md"], ["docs/a.md"]),
        ("*.md", ["a.md", "x/y/a.md"], ["a.txt", "a.md.txt"]),
        ("docs/*.md", ["docs/a.md"], ["docs/x/a.md", "a.md"]),
        ("**/secret/*", ["secret/a", "x/y/secret/a"], ["secret2/a"]),
        ("/top.md", ["top.md"], ["x/top.md"]),
        ("docs/[ab].md", ["docs/a.md", "docs/b.md"], ["docs/c.md"]),
    ],
)
def test_policy_globs(glob: str, matching: list[str], not_matching: list[str]) -> None:
    pattern = glob_pattern(glob)
    assert all(pattern.fullmatch(p) for p in matching)
    assert not any(pattern.fullmatch(p) for p in not_matching)


# -- determinism and this repository ---------------------------------------------------------


def test_output_is_sorted_deterministic_and_unique(tmp_path: Path) -> None:
    repo = init(tmp_path / "det")
    for index in range(5):
        write(repo, f"docs/page{index}.md", f"# Page {index}\n\nSee ADR-1 and ADR 1.\n")
    write(repo, "docs/adr/0001-x.md", "# 1. X\n\nStatus: accepted\n")
    commit(repo)
    first, second = load_repository(repo), load_repository(repo)
    assert first == second
    ids = [e.element_id for e in first.elements]
    assert ids == sorted(ids)
    assert len(ids) == len(set(ids))
    keys = [r.key for r in first.relations]
    assert keys == sorted(keys)
    assert len(keys) == len(set(keys))
    document_ids = [e.element_id for e in first.elements if isinstance(e, Document)]
    assert all(i.startswith(first.id_prefix) for i in document_ids)


def test_loads_this_repository() -> None:
    src = load_repository(ROOT)
    assert isinstance(src.repository, Repository)
    decisions = [
        e for e in src.elements if isinstance(e, Decision) and e.uri and "docs/adr/" in e.uri
    ]
    assert len(decisions) >= 8
    assert all(d.status is DecisionStatus.ACCEPTED for d in decisions)
    readme = by_id(src)[f"{src.id_prefix}README.md"]
    assert isinstance(readme, Document)
    assert readme.name.startswith("UDA")
    uris = [e.uri or "" for e in src.elements if isinstance(e, Document)]
    assert not [u for u in uris if u.startswith((".venv/", ".git/", ".uda/"))]


def test_odd_file_names_nested_repositories_and_submodules(tmp_path: Path) -> None:
    repo = init(tmp_path / "odd")
    write(repo, 'docs/spaced "quoted" é.md', "# Odd\n")
    commit(repo, who=("Zoë", "zoe@example.com"), when="2023-01-01 00:00:00 +0000")
    nested = init(repo / "vendor" / "nested", remote=None)
    write(nested, "inside.md", "# Inside\n")
    commit(nested)
    inner = init(tmp_path / "inner", remote=None)
    write(inner, "sub.md", "# Sub\n")
    commit(inner)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "mod")
    commit(repo, ".gitmodules", "mod", when="2023-02-01 00:00:00 +0000")
    src = load_repository(repo)
    odd = document(src, 'myrepo:docs/spaced "quoted" é.md')
    assert odd.timestamp == utc("2023-01-01T00:00:00")
    assert edges(src, "authoredBy") == {(odd.element_id, "person:zoe@example.com")}
    assert reasons(src) == {
        ".gitmodules": "hidden-file",
        "mod": "nested-repository",
        "vendor/nested": "nested-repository",
    }
