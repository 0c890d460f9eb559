"""The repository loader: the repository element, its id and name (from the origin remote,
else the folder), and the whole load — sorted, deterministic, unique — on this repository
and on odd file names, nested repositories and submodules. Helpers in loaders_fixtures.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from loaders_fixtures import (
    NEEDS_GIT,
    REMOTE,
    by_id,
    commit,
    document,
    edges,
    git,
    init,
    reasons,
    utc,
    write,
)

from ontology import Decision, DecisionStatus, Document, Repository
from uda.loaders import load_repository

pytestmark = NEEDS_GIT

ROOT = Path(__file__).resolve().parent.parent


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
    # Each record reads as the status its own "Status:" line states (most are accepted; a
    # withdrawn or superseded record must read as such, not as accepted).
    for decision in decisions:
        stated = re.search(r"^Status:\s*(\w+)", (ROOT / str(decision.uri)).read_text(), re.M)
        assert stated is not None, decision.uri
        assert decision.status is DecisionStatus(stated.group(1).lower()), decision.uri
    assert sum(d.status is DecisionStatus.ACCEPTED for d in decisions) >= 8
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
