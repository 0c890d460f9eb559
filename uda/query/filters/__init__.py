"""Filters on elements: the grammar callers write, and the fields and values it ranges over.

`grammar` parses `context_filters` (either spelling) into a filter tree
(`connectors.contract.filter_tree`), checking every field, path and operand against the
ontology; `fields` lists the filterable fields and normalises values the same way for every
store.
"""

from __future__ import annotations

from uda.query.filters.fields import (
    element_filter_values,
    filterable_fields,
    normalise,
    normalise_operand,
)
from uda.query.filters.grammar import MAX_DEPTH, MAX_LEAVES, MAX_PATTERN, parse_filters

__all__ = [
    "MAX_DEPTH",
    "MAX_LEAVES",
    "MAX_PATTERN",
    "element_filter_values",
    "filterable_fields",
    "normalise",
    "normalise_operand",
    "parse_filters",
]
