"""Clearance labels: the (sensitivity, scope) pairs that partition the lexical indexes.

A caller sees a label whole or not at all, so an index per label holds nothing that a caller
searching it may not see: its statistics (document count, average length, document
frequencies), which the engine's own scoring reads, never mix in a chunk above the caller's
clearance. That is what keeps the candidates, not only their final scores, independent of
hidden chunks (ADR 5's non-interference, ADR 50).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from connectors.contract.records import SearchFilter


@dataclass(frozen=True)
class Label:
    """A chunk's clearance: its sensitivity rank and its scope (None: no project bound)."""

    rank: int
    scope: str | None

    @property
    def folder(self) -> str:
        """The label's index folder name: fixed characters only, whatever the scope holds."""
        if self.scope is None:
            return f"r{self.rank}-open"
        digest = hashlib.sha256(self.scope.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return f"r{self.rank}-{digest}"

    @property
    def sort_key(self) -> tuple[int, bool, str]:
        """A total order (a scope may be None, and None does not compare with text)."""
        return (self.rank, self.scope is not None, self.scope or "")

    def allowed_by(self, search_filter: SearchFilter) -> bool:
        """Whether a caller with this filter's clearance may see the label's chunks."""
        if self.rank > search_filter.max_sensitivity_rank:
            return False
        return (
            self.scope is None or search_filter.all_projects or self.scope in search_filter.projects
        )
