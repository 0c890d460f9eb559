"""The repository loader's decision records: Nygard and MADR records become decisions,
supersedes (from either side, once), and governedBy from links and mentions. Helpers in
loaders_fixtures.py.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from loaders_fixtures import NEEDS_GIT, edges, write

from ontology import Decision, DecisionStatus, Document
from uda.loaders import load_repository

pytestmark = NEEDS_GIT


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
