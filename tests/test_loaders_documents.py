"""The repository loader's documents: names and text, what is skipped and why, source code
on request, .gitignore, and a subfolder of a git repository. Helpers in loaders_fixtures.py.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from loaders_fixtures import NEEDS_GIT, commit, edges, init, reasons, utc, write

from ontology import Document
from uda.loaders import load_repository

pytestmark = NEEDS_GIT


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
