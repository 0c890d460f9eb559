"""The repository loader's sensitivity and scope: .uda-policy.toml rules and defaults, front
matter over policy, invalid and malformed values, and the policy's globs. Helpers in
loaders_fixtures.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from loaders_fixtures import NEEDS_GIT, commit, document, init, reasons, write

from ontology import Document, Person, Sensitivity
from uda.errors import ConfigError, InvalidElementError
from uda.loaders import load_repository
from uda.loaders.policy import glob_pattern

pytestmark = NEEDS_GIT


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
