"""Architecture decision records: which files are decisions, their fields, and their links.

Two formats are read. Nygard: `# 3. Title`, a `Date: 2020-01-01` line, a `## Status` section
(or a `Status: accepted` line) whose first word is the status, and `Supersedes [...]` /
`Superseded by [...]` lines. MADR: YAML front matter `status:` / `date:`, or `* Status:` /
`* Date:` bullets, and a `# Title`.

A reference on a `Supersedes` / `Superseded by` line makes a `supersedes` edge only; it is not
also read as `governedBy`: a decision is not governed by the one it replaces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import PurePosixPath
from typing import Any

from ontology import DecisionStatus, Relation, RelationType
from uda.loaders.markup import link_targets, resolve_link

DECISION_FOLDERS = (
    "docs/adr",
    "docs/decisions",
    "doc/adr",
    "adr",
    "decisions",
    "docs/architecture/decisions",
)
_NUMBERED = re.compile(r"^(\d+)(?=[-_. ]|$)")
_FIELD_LINE = re.compile(r"^\s*(?:[*+-]\s+)?\**\s*(status|date)\s*\**\s*:\s*\**\s*(.*)$", re.I)
_STATUS_HEADING = re.compile(r"^ {0,3}#{1,6}\s*status\s*:?\s*#*\s*$", re.I)
_HEADING = re.compile(r"^ {0,3}#{1,6}\s")
_WORD = re.compile(r"[A-Za-z]+")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_MENTION = re.compile(r"\bADR[- ]?0*(\d{1,6})\b", re.I)
_SUPERSEDES = re.compile(r"\bsupersedes\b", re.I)
_SUPERSEDED_BY = re.compile(r"\bsuperseded\s+by\b", re.I)
_STATUSES = {status.value: status for status in DecisionStatus}


def decision_number(path: str) -> int | None:
    """The record's number when `path` is a numbered file in a decision folder, else None.

    The folders may sit at any depth (`services/billing/docs/adr/0001-x.md` counts), so that
    each part of a monorepo can keep its own records.
    """
    pure = PurePosixPath(path)
    folder = pure.parent.as_posix()
    if not any(folder == f or folder.endswith("/" + f) for f in DECISION_FOLDERS):
        return None
    match = _NUMBERED.match(pure.name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, kw_only=True)
class DecisionFields:
    """What a record says about itself."""

    status: DecisionStatus | None = None
    decided_on: date | None = None


def parse_fields(text: str, front_matter: Mapping[str, Any]) -> DecisionFields:
    """Status and date of a record.

    Front matter comes first, then `Status:` / `Date:` lines (bullets too), then the first
    word of a `## Status` section. An unknown status word gives None.
    """
    status_word: str | None = _first_word(front_matter.get("status"))
    decided_on = _as_date(front_matter.get("date"))
    lines = text.split("\n")
    for line in lines:
        match = _FIELD_LINE.match(line)
        if not match:
            continue
        key, rest = match.group(1).lower(), match.group(2)
        if key == "status" and status_word is None:
            status_word = _first_word(rest)
        elif key == "date" and decided_on is None:
            decided_on = _as_date(rest)
    if status_word is None:
        status_word = _status_section(lines)
    status = _STATUSES.get(status_word.lower()) if status_word else None
    return DecisionFields(status=status, decided_on=decided_on)


def _status_section(lines: list[str]) -> str | None:
    for index, line in enumerate(lines):
        if not _STATUS_HEADING.match(line):
            continue
        for following in lines[index + 1 :]:
            if _HEADING.match(following):
                return None
            if following.strip():
                return _first_word(following)
    return None


def _first_word(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    match = _WORD.search(value)
    return match.group(0) if match else None


def _as_date(value: object) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        match = _ISO_DATE.search(value)
        if match:
            try:
                return date.fromisoformat(match.group(0))
            except ValueError:
                return None
    return None


@dataclass(frozen=True, kw_only=True)
class LinkSource:
    """A loaded text that may reference decisions."""

    element_id: str
    path: str
    text: str
    is_decision: bool


@dataclass(frozen=True, kw_only=True)
class DecisionRef:
    """A loaded decision record, as a target of references."""

    element_id: str
    path: str
    number: int


class _Index:
    """Decisions by path and by number.

    A number shared by several folders resolves to the referring file's own folder, else it is
    left unresolved rather than guessed.
    """

    def __init__(self, decisions: Iterable[DecisionRef]) -> None:
        self.by_path: dict[str, DecisionRef] = {}
        self.by_number: dict[int, list[DecisionRef]] = {}
        for ref in decisions:
            self.by_path[ref.path] = ref
            self.by_number.setdefault(ref.number, []).append(ref)

    def resolve(self, source: str, fragment: str) -> list[DecisionRef]:
        found: list[DecisionRef] = []
        for target in link_targets(fragment):
            resolved = resolve_link(source, target)
            if resolved is not None and resolved in self.by_path:
                found.append(self.by_path[resolved])
        for mention in _MENTION.finditer(fragment):
            candidates = self.by_number.get(int(mention.group(1)), [])
            if len(candidates) > 1:
                folder = PurePosixPath(source).parent
                candidates = [c for c in candidates if PurePosixPath(c.path).parent == folder]
            if len(candidates) == 1:
                found.append(candidates[0])
        return found


def decision_relations(
    sources: Sequence[LinkSource], decisions: Sequence[DecisionRef]
) -> list[Relation]:
    """`supersedes` and `governedBy` edges read from the texts, without duplicates or loops.

    Args:
        sources: Every loaded document and decision.
        decisions: The loaded decisions.

    Returns:
        The edges, sorted by (source, relation, target).
    """
    index = _Index(decisions)
    edges: set[tuple[str, str, str]] = set()
    for source in sources:
        for line in source.text.split("\n"):
            governing = line
            if source.is_decision:
                governing = _supersede_edges(source, line, index, edges)
            for ref in index.resolve(source.path, governing):
                edges.add((source.element_id, RelationType.GOVERNED_BY.value, ref.element_id))
    return [Relation(source_id=s, relation=r, target_id=t) for s, r, t in sorted(edges) if s != t]


def _supersede_edges(
    source: LinkSource, line: str, index: _Index, edges: set[tuple[str, str, str]]
) -> str:
    """Add the `supersedes` edges of one line; return the part of it left for `governedBy`."""
    relation = RelationType.SUPERSEDES.value
    newer = _SUPERSEDES.search(line)
    older = _SUPERSEDED_BY.search(line)
    keyword = min((m for m in (newer, older) if m), key=lambda m: m.start(), default=None)
    if keyword is None:
        return line
    # Each keyword owns the text up to the other one, should a line carry both.
    if newer:
        stop = older.start() if older and older.start() > newer.start() else len(line)
        for ref in index.resolve(source.path, line[newer.end() : stop]):
            edges.add((source.element_id, relation, ref.element_id))
    if older:
        stop = newer.start() if newer and newer.start() > older.start() else len(line)
        for ref in index.resolve(source.path, line[older.end() : stop]):
            edges.add((ref.element_id, relation, source.element_id))
    return line[: keyword.start()]
