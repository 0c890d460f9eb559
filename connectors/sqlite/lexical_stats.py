"""Per-label statistics of the current chunks, kept in the writes that change the chunks.

A caller's BM25 needs the count and total length of the chunks it may see, and each query
term's document frequency among them (ADR 5). Summing a few rows per (label, type) gives
them exactly, where counting the visible occurrences of every query term read every
posting (ADR 50). The rows change by deltas in the same transaction as `text_chunks`, so
they are never out of step with the chunks a scan would count; `rebuild` recomputes them.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from connectors.contract.records import OPEN, SearchFilter
from connectors.tantivy import Label

_LABEL_KEY = "t.sensitivity_rank, t.scope IS NOT NULL, coalesce(t.scope, ''), t.element_type"

# Deltas: each `(term id, rank, scoped, scope, type, +/- chunks)`, summed over a write first.
_DF_DELTA = """
INSERT INTO lexical_term_df (term_id, sensitivity_rank, scoped, scope, element_type, chunks)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO UPDATE SET chunks = chunks + excluded.chunks
"""
_LABEL_DELTA = """
INSERT INTO lexical_labels
    (sensitivity_rank, scoped, scope, element_type, chunks, total_length)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO UPDATE SET chunks = chunks + excluded.chunks,
    total_length = total_length + excluded.total_length
"""
# From the postings (`connectors.sqlite.postings`): one row per (term, chunk), in C.
_REBUILD = (
    "DELETE FROM lexical_term_df",
    "DELETE FROM lexical_labels",
    f"""INSERT INTO lexical_term_df
        (term_id, sensitivity_rank, scoped, scope, element_type, chunks)
    SELECT CAST(p.term AS INTEGER), {_LABEL_KEY}, count(*)
    FROM text_postings_rows p JOIN text_chunks t ON t.rowid = p.doc
    WHERE t.valid_to = {OPEN} GROUP BY 1, 2, 3, 4, 5""",  # noqa: S608
    f"""INSERT INTO lexical_labels
        (sensitivity_rank, scoped, scope, element_type, chunks, total_length)
    SELECT {_LABEL_KEY}, count(*), sum(t.length)
    FROM text_chunks t WHERE t.valid_to = {OPEN} GROUP BY 1, 2, 3, 4""",  # noqa: S608
)
# `uda check`: label rows that disagree with a recount of the current chunks (both ways).
STATS_DRIFT_SQL = f"""
WITH recount(sensitivity_rank, scoped, scope, element_type, chunks, total_length) AS (
    SELECT {_LABEL_KEY}, count(*), sum(t.length)
    FROM text_chunks t WHERE t.valid_to = {OPEN} GROUP BY 1, 2, 3, 4
)
SELECT (SELECT count(*) FROM recount r WHERE NOT EXISTS (
            SELECT 1 FROM lexical_labels l
            WHERE l.sensitivity_rank = r.sensitivity_rank AND l.scoped = r.scoped
              AND l.scope = r.scope AND l.element_type = r.element_type
              AND l.chunks = r.chunks AND l.total_length = r.total_length))
     + (SELECT count(*) FROM lexical_labels l WHERE l.chunks <> 0 AND NOT EXISTS (
            SELECT 1 FROM recount r
            WHERE l.sensitivity_rank = r.sensitivity_rank AND l.scoped = r.scoped
              AND l.scope = r.scope AND l.element_type = r.element_type))
"""  # noqa: S608 - fixed fragments only
_LABELS = (
    "SELECT sensitivity_rank, scoped, scope, element_type, chunks, total_length "
    "FROM lexical_labels WHERE chunks > 0"
)
_DF = """
SELECT l.term, l.id, d.sensitivity_rank, d.scoped, d.scope, d.element_type, d.chunks
FROM lexicon l JOIN lexical_term_df d ON d.term_id = l.id
WHERE l.term IN (SELECT value FROM json_each(?)) AND d.chunks > 0
"""


LabelKey = tuple[int, int, str, str]
"""A chunk's (sensitivity rank, scoped, scope or '', element type): a statistics row's key."""


def label_key(rank: int, scope: str | None, element_type: str) -> LabelKey:
    """The statistics key of a chunk with this clearance label and type."""
    return (int(rank), int(scope is not None), scope or "", element_type)


class Delta:
    """The statistics a write changes, summed over its chunks before one upsert each.

    A chunk written again under the same label takes away and adds back its terms: those
    sum to nothing and are not written at all.
    """

    def __init__(self) -> None:
        self._df: dict[LabelKey, Counter[int]] = {}
        self._labels: dict[LabelKey, tuple[int, int]] = {}

    def change(self, key: LabelKey, term_ids: Iterable[int], length: int, sign: int) -> None:
        """Add (`sign` 1) or take away (-1) one current chunk's terms and length."""
        counts = self._df.get(key)
        if counts is None:
            counts = self._df[key] = Counter()
        if sign > 0:
            counts.update(term_ids)
        else:
            counts.subtract(term_ids)
        chunks, total = self._labels.get(key, (0, 0))
        self._labels[key] = (chunks + sign, total + sign * length)

    def write(self, conn: sqlite3.Connection) -> None:
        """Apply the summed changes (inside the write's transaction)."""
        rows = [(t, *key, n) for key, counts in self._df.items() for t, n in counts.items() if n]
        conn.executemany(_DF_DELTA, sorted(rows))  # in key order: B-tree pages in turn
        conn.executemany(
            _LABEL_DELTA,
            [(*key, n, total) for key, (n, total) in self._labels.items() if n or total],
        )


def rebuild(conn: sqlite3.Connection) -> None:
    """Recompute every row from the current chunks and their terms."""
    for statement in _REBUILD:
        conn.execute(statement)


def _label(rank: int, scoped: int, scope: str) -> Label:
    return Label(rank=int(rank), scope=scope if scoped else None)


@dataclass(frozen=True, kw_only=True)
class CallerStatistics:
    """What one caller's BM25 needs: counted over the labels and types it may see."""

    chunks: int
    total_length: int
    labels: tuple[Label, ...]
    # None when the types asked for include every type the visible labels hold: the engine
    # then needs no type filter.
    element_types: tuple[str, ...] | None

    @property
    def average_length(self) -> float:
        """The visible chunks' mean length."""
        return self.total_length / self.chunks if self.chunks else 0.0


LabelRow = tuple[int, int, str, str, int, int]


def label_rows(conn: sqlite3.Connection) -> list[LabelRow]:
    """Every (label, type) row that counts chunks: a few rows, cacheable per text write."""
    return [tuple(row) for row in conn.execute(_LABELS)]  # pyright: ignore[reportReturnType]


def caller_statistics(rows: Sequence[LabelRow], search_filter: SearchFilter) -> CallerStatistics:
    """Count, length and labels of the current chunks this filter's clearance and types allow.

    Only clearance and types: a filter that also bounds validity or values is not the
    engine's (`engine_can_serve`). `rows` are `label_rows`.
    """
    types = search_filter.element_types
    chunks = total = 0
    labels: set[Label] = set()
    held: set[str] = set()
    for rank, scoped, scope, element_type, count, length in rows:
        label = _label(rank, scoped, scope)
        if not label.allowed_by(search_filter):
            continue
        held.add(element_type)
        if types is not None and element_type not in types:
            continue
        chunks += int(count)
        total += int(length)
        labels.add(label)
    wanted = None if types is None or held <= set(types) else tuple(sorted(types))
    return CallerStatistics(
        chunks=chunks,
        total_length=total,
        labels=tuple(sorted(labels, key=lambda x: x.sort_key)),
        element_types=wanted,
    )


def document_frequencies(
    conn: sqlite3.Connection, terms: Sequence[str], search_filter: SearchFilter
) -> dict[str, tuple[int, int]]:
    """Each term's lexicon id and its count of chunks this filter's clearance and types allow.

    Current chunks only; a term that no allowed chunk holds is left out.
    """
    types = search_filter.element_types
    out: dict[str, tuple[int, int]] = {}
    for term, term_id, rank, scoped, scope, element_type, count in conn.execute(
        _DF, (json.dumps(list(terms)),)
    ):
        if types is not None and element_type not in types:
            continue
        if _label(rank, scoped, scope).allowed_by(search_filter):
            held = out.get(term, (term_id, 0))[1]
            out[term] = (int(term_id), held + int(count))
    return out


def engine_can_serve(search_filter: SearchFilter) -> bool:
    """Whether the filter is clearance and types only (current states, no value filter)."""
    return (
        search_filter.as_of is None and not search_filter.predicates and search_filter.tree is None
    )
