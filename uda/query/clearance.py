"""Clearance: who may see what. Pure functions, no I/O.

An element is visible iff its sensitivity is at or below the caller's level and its scope is
empty or granted. Deny by default: no level given means `public` only, no project given means
no scoped element.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ontology import Sensitivity
from ontology.elements import SCOPE_PATTERN
from uda.errors import UnknownClearanceError

ALL_PROJECTS = "project:*"


@dataclass(frozen=True, kw_only=True)
class Clearance:
    """What a caller is cleared for: a sensitivity level and a set of project scopes."""

    level: Sensitivity = Sensitivity.PUBLIC
    projects: frozenset[str] = frozenset()
    all_projects: bool = False

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Clearance:
        """Read `clearance_scope` entries: level names, `project:<name>` and `project:*`.

        Raises:
            UnknownClearanceError: an entry is none of those, naming the entry.
        """
        level = Sensitivity.PUBLIC
        projects: set[str] = set()
        all_projects = False
        levels = {s.value: s for s in Sensitivity}
        for entry in entries:
            if not isinstance(entry, str):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise UnknownClearanceError(
                    f"clearance_scope entries must be strings, got {entry!r}",
                    field="clearance_scope",
                    value=entry,
                )
            if entry in levels:
                level = max(level, levels[entry], key=lambda s: s.rank)
            elif entry == ALL_PROJECTS:
                all_projects = True
            elif SCOPE_PATTERN.match(entry):
                projects.add(entry)
            else:
                raise UnknownClearanceError(
                    f"unknown clearance_scope entry {entry!r}: use one of "
                    f"{', '.join(levels)}, 'project:<name>' or 'project:*'",
                    field="clearance_scope",
                    value=entry,
                )
        return cls(level=level, projects=frozenset(projects), all_projects=all_projects)

    def allows(self, sensitivity: Sensitivity | str, scope: str | None) -> bool:
        """Whether an element with this sensitivity and scope is visible."""
        return self.allows_rank(Sensitivity(sensitivity).rank, scope)

    def allows_rank(self, rank: int, scope: str | None) -> bool:
        """`allows` for a sensitivity given by its rank, as the stores keep it.

        Phase 3 checks every fetched state (hundreds per search); going through the enum
        for each was a measurable part of it. A rank outside the scale (a damaged row) is
        hidden, as the enum lookup refused it.
        """
        if not 0 <= rank <= self.level.rank:
            return False
        return scope is None or self.all_projects or scope in self.projects

    def narrow(self, requested: Clearance) -> Clearance:
        """The intersection of this grant and a requested clearance: never more than either."""
        level = min(self.level, requested.level, key=lambda s: s.rank)
        if self.all_projects and requested.all_projects:
            return Clearance(level=level, all_projects=True)
        if self.all_projects:
            projects = requested.projects
        elif requested.all_projects:
            projects = self.projects
        else:
            projects = self.projects & requested.projects
        return Clearance(level=level, projects=projects)

    def entries(self) -> list[str]:
        """The clearance as `clearance_scope` entries (round-trips through `parse`)."""
        out = [self.level.value]
        out += [ALL_PROJECTS] if self.all_projects else sorted(self.projects)
        return out


class ClearedState(Protocol):
    """What the visibility rule reads of a stored state: a whole one or just its clearance."""

    @property
    def tombstone(self) -> bool:
        """Whether this state deletes the element."""
        ...

    @property
    def sensitivity_rank(self) -> int:
        """The state's sensitivity, as its rank on the ordered scale."""
        ...

    @property
    def scope(self) -> str | None:
        """The state's project bound, if any."""
        ...

    @property
    def latest_sensitivity_rank(self) -> int:
        """The sensitivity rank of the element's newest state."""
        ...

    @property
    def latest_scope(self) -> str | None:
        """The project bound of the element's newest state."""
        ...


def state_visible(clearance: Clearance, state: ClearedState) -> bool:
    """THE visibility rule: the state read *and* the element's newest state must be visible.

    Requiring both means that reclassifying an element upwards also hides its history; a
    deleted element (a tombstone) is visible to nobody. The planner (results, context nodes,
    edges, counts and scores), element lookup and every later reader apply this one function.
    """
    if state.tombstone:
        return False
    return clearance.allows_rank(state.sensitivity_rank, state.scope) and clearance.allows_rank(
        state.latest_sensitivity_rank, state.latest_scope
    )
