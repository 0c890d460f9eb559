"""Unit tests of the pure `uda.query.clearance.Clearance`: parse, allows, narrow, entries.

Visibility is checked against an oracle written here from docs/design.md ("Clearance"), not
against the implementation's own helpers.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import uda
from ontology import Sensitivity
from uda.query.clearance import Clearance

LEVELS = ["public", "internal", "confidential", "restricted"]
PROJECTS = ["project:a", "project:b", "project:c"]
SCOPES: list[str | None] = [None, *PROJECTS]


def oracle_allows(entries: list[str], sensitivity: str, scope: str | None) -> bool:
    """docs/design.md: a level grants itself and below; no level = public; projects by name or *."""
    granted = max((LEVELS.index(e) for e in entries if e in LEVELS), default=0)
    if LEVELS.index(sensitivity) > granted:
        return False
    return scope is None or "project:*" in entries or scope in entries


entry_lists = st.lists(st.sampled_from([*LEVELS, *PROJECTS, "project:*"]), max_size=5)
targets = st.tuples(st.sampled_from(LEVELS), st.sampled_from(SCOPES))


# -- parse ---------------------------------------------------------------------------------


def test_no_entries_is_public_only() -> None:
    c = Clearance.parse([])
    assert c.level is Sensitivity.PUBLIC
    assert c.projects == frozenset()
    assert c.all_projects is False
    assert c.allows("public", None)
    assert not c.allows("internal", None)
    assert not c.allows("public", "project:a")


def test_default_clearance_denies_everything_but_public_unscoped() -> None:
    c = Clearance()
    assert c == Clearance.parse([])
    assert [lvl for lvl in LEVELS if c.allows(lvl, None)] == ["public"]
    assert not any(c.allows(lvl, p) for lvl in LEVELS for p in PROJECTS)


@pytest.mark.parametrize("level", LEVELS)
def test_parse_level_grants_that_level_and_below(level: str) -> None:
    c = Clearance.parse([level])
    assert c.level is Sensitivity(level)
    assert c.projects == frozenset()
    assert not c.all_projects
    rank = LEVELS.index(level)
    for i, other in enumerate(LEVELS):
        assert c.allows(other, None) is (i <= rank), (level, other)
        # A level never grants a project.
        assert not c.allows(other, "project:a")


def test_parse_several_levels_keeps_the_highest_whatever_the_order() -> None:
    assert Clearance.parse(["restricted", "internal"]).level is Sensitivity.RESTRICTED
    assert Clearance.parse(["internal", "restricted"]).level is Sensitivity.RESTRICTED
    assert Clearance.parse(["confidential", "public"]).level is Sensitivity.CONFIDENTIAL
    assert Clearance.parse(["public", "internal", "public"]).level is Sensitivity.INTERNAL


def test_parse_project_without_level_is_public_in_that_project() -> None:
    c = Clearance.parse(["project:core"])
    assert c.level is Sensitivity.PUBLIC
    assert c.projects == frozenset({"project:core"})
    assert not c.all_projects
    assert c.allows("public", "project:core")
    assert c.allows("public", None)
    assert not c.allows("public", "project:other")
    assert not c.allows("internal", "project:core")


def test_parse_projects_and_level_together() -> None:
    c = Clearance.parse(["project:a", "confidential", "project:b", "project:a"])
    assert c.level is Sensitivity.CONFIDENTIAL
    assert c.projects == frozenset({"project:a", "project:b"})
    assert c.allows("confidential", "project:b")
    assert not c.allows("restricted", "project:b")
    assert not c.allows("public", "project:c")


def test_parse_project_names_are_case_sensitive() -> None:
    c = Clearance.parse(["project:Core"])
    assert c.allows("public", "project:Core")
    assert not c.allows("public", "project:core")


def test_parse_all_projects() -> None:
    c = Clearance.parse(["project:*", "internal"])
    assert c.all_projects
    assert c.level is Sensitivity.INTERNAL
    for scope in [*PROJECTS, "project:anything-else", None]:
        assert c.allows("internal", scope)
        assert not c.allows("confidential", scope)


def test_parse_accepts_any_iterable() -> None:
    c = Clearance.parse(e for e in ["internal", "project:x"])
    assert c == Clearance(level=Sensitivity.INTERNAL, projects=frozenset({"project:x"}))


@pytest.mark.parametrize(
    "entry",
    [
        "secret",
        "PUBLIC",
        "Restricted",
        " internal",
        "internal ",
        "",
        "project:",
        "project",
        "project:a b",
        "project:-a",
        "project:**",
        "project:a*",
        "projects:a",
        "top-secret",
        "*",
    ],
)
def test_unknown_entry_raises_naming_the_field_and_entry(entry: str) -> None:
    with pytest.raises(uda.UnknownClearanceError) as info:
        Clearance.parse(["internal", entry, "project:a"])
    assert info.value.field == "clearance_scope"
    assert info.value.value == entry
    assert repr(entry) in str(info.value)
    # Part of the user-error tree (HTTP 4xx), and a ValueError for plain Python callers.
    assert isinstance(info.value, uda.UserError)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("entry", [3, None, b"public", ("public",)])
def test_non_string_entry_raises(entry: object) -> None:
    with pytest.raises(uda.UnknownClearanceError) as info:
        Clearance.parse(["public", entry])  # type: ignore[list-item]
    assert info.value.field == "clearance_scope"
    assert info.value.value == entry


def test_clearance_is_frozen() -> None:
    c = Clearance.parse(["internal"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.level = Sensitivity.RESTRICTED  # type: ignore[misc]


# -- allows --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "sensitivity", "scope", "expected"),
    [
        ([], "public", None, True),
        ([], "internal", None, False),
        ([], "public", "project:a", False),
        (["restricted"], "restricted", None, True),
        (["restricted"], "public", "project:a", False),
        (["restricted", "project:a"], "restricted", "project:a", True),
        (["restricted", "project:a"], "restricted", "project:b", False),
        (["internal", "project:*"], "internal", "project:zzz", True),
        (["internal", "project:*"], "confidential", None, False),
        (["project:*"], "internal", "project:a", False),
        (["confidential", "project:b"], "confidential", "project:b", True),
        (["confidential", "project:b"], "restricted", "project:b", False),
    ],
)
def test_allows_table(
    entries: list[str], sensitivity: str, scope: str | None, expected: bool
) -> None:
    c = Clearance.parse(entries)
    assert c.allows(sensitivity, scope) is expected
    assert c.allows(Sensitivity(sensitivity), scope) is expected


def test_allows_rejects_an_unknown_sensitivity() -> None:
    with pytest.raises(ValueError, match="secret"):
        Clearance.parse(["restricted"]).allows("secret", None)


@settings(max_examples=300)
@given(entries=entry_lists, target=targets)
def test_allows_matches_the_design_rule(entries: list[str], target: tuple[str, str | None]) -> None:
    sensitivity, scope = target
    c = Clearance.parse(entries)
    assert c.allows(sensitivity, scope) is oracle_allows(entries, sensitivity, scope)


@settings(max_examples=200)
@given(entries=entry_lists, target=targets)
def test_allows_is_monotone_in_the_level(
    entries: list[str], target: tuple[str, str | None]
) -> None:
    # Being visible at some level implies being visible at every lower level.
    sensitivity, scope = target
    c = Clearance.parse(entries)
    if c.allows(sensitivity, scope):
        for lower in LEVELS[: LEVELS.index(sensitivity)]:
            assert c.allows(lower, scope)


@settings(max_examples=200)
@given(entries=entry_lists, extra=st.sampled_from([*LEVELS, *PROJECTS, "project:*"]))
def test_adding_an_entry_never_hides_anything(entries: list[str], extra: str) -> None:
    before = Clearance.parse(entries)
    after = Clearance.parse([*entries, extra])
    for sensitivity in LEVELS:
        for scope in SCOPES:
            if before.allows(sensitivity, scope):
                assert after.allows(sensitivity, scope), (sensitivity, scope)


# -- entries round trip --------------------------------------------------------------------


@settings(max_examples=200)
@given(entries=entry_lists)
def test_entries_round_trip_through_parse(entries: list[str]) -> None:
    # Compared by what they allow: `project:*` makes any listed project redundant, and
    # `entries()` may drop it.
    c = Clearance.parse(entries)
    again = Clearance.parse(c.entries())
    assert again.level is c.level
    assert again.all_projects is c.all_projects
    for sensitivity in LEVELS:
        for scope in SCOPES:
            assert again.allows(sensitivity, scope) is c.allows(sensitivity, scope)


# -- narrow --------------------------------------------------------------------------------


def test_narrow_examples() -> None:
    grant = Clearance.parse(["confidential", "project:a", "project:b"])
    asked = Clearance.parse(["restricted", "project:b", "project:c"])
    n = grant.narrow(asked)
    assert n.level is Sensitivity.CONFIDENTIAL
    assert n.projects == frozenset({"project:b"})
    assert not n.all_projects
    assert not n.allows("restricted", None)
    assert not n.allows("public", "project:a")
    assert not n.allows("public", "project:c")
    assert n.allows("confidential", "project:b")


def test_narrow_cannot_widen_to_all_projects() -> None:
    grant = Clearance.parse(["internal", "project:a"])
    asked = Clearance.parse(["restricted", "project:*"])
    n = grant.narrow(asked)
    assert not n.all_projects
    assert n.level is Sensitivity.INTERNAL
    assert n.allows("internal", "project:a")
    assert not n.allows("internal", "project:b")
    assert not n.allows("confidential", "project:a")


def test_narrow_all_projects_grant_to_a_request_for_one() -> None:
    grant = Clearance.parse(["restricted", "project:*"])
    asked = Clearance.parse(["public", "project:b"])
    n = grant.narrow(asked)
    assert n.allows("public", "project:b")
    assert not n.allows("public", "project:a")
    assert not n.allows("internal", None)


def test_narrow_by_an_empty_request_is_public_only() -> None:
    grant = Clearance.parse(["restricted", "project:*"])
    n = grant.narrow(Clearance.parse([]))
    assert n == Clearance()


@settings(max_examples=500)
@given(grant=entry_lists, asked=entry_lists, target=targets)
def test_narrow_never_widens(
    grant: list[str], asked: list[str], target: tuple[str, str | None]
) -> None:
    # narrow(a, b) allows x only if both a and b allow x.
    a, b = Clearance.parse(grant), Clearance.parse(asked)
    sensitivity, scope = target
    if a.narrow(b).allows(sensitivity, scope):
        assert a.allows(sensitivity, scope), "narrow widened the grant"
        assert b.allows(sensitivity, scope), "narrow widened the request"


@settings(max_examples=500)
@given(grant=entry_lists, asked=entry_lists, target=targets)
def test_narrow_is_the_exact_intersection(
    grant: list[str], asked: list[str], target: tuple[str, str | None]
) -> None:
    # The docstring promises the intersection: what both allow stays visible.
    a, b = Clearance.parse(grant), Clearance.parse(asked)
    sensitivity, scope = target
    expected = oracle_allows(grant, sensitivity, scope) and oracle_allows(asked, sensitivity, scope)
    assert a.narrow(b).allows(sensitivity, scope) is expected
    assert b.narrow(a).allows(sensitivity, scope) is expected


@settings(max_examples=200)
@given(grant=entry_lists, asked=entry_lists, again=entry_lists)
def test_narrowing_twice_never_widens(grant: list[str], asked: list[str], again: list[str]) -> None:
    a, b, c = (Clearance.parse(e) for e in (grant, asked, again))
    once = a.narrow(b)
    twice = once.narrow(c)
    for sensitivity in LEVELS:
        for scope in SCOPES:
            if twice.allows(sensitivity, scope):
                assert once.allows(sensitivity, scope)
                assert c.allows(sensitivity, scope)


@settings(max_examples=100)
@given(grant=entry_lists)
def test_narrow_by_itself_changes_nothing(grant: list[str]) -> None:
    a = Clearance.parse(grant)
    n = a.narrow(a)
    assert n.level is a.level
    for sensitivity in LEVELS:
        for scope in [*SCOPES, "project:other"]:
            assert n.allows(sensitivity, scope) is a.allows(sensitivity, scope)
