"""Tantivy as the lexical leg's engine: the chunks' terms in inverted indexes, one per label.

The engine finds candidates (block-max WAND over the query terms, visibility as filters inside
the engine); the store that owns the chunks keeps the statistics a caller's BM25 needs and
scores the candidates exactly (docs/adr/0050-lexical-leg-on-tantivy.md).
"""

from __future__ import annotations

from connectors.tantivy.index import Candidate, LexicalIndexes
from connectors.tantivy.labels import Label

__all__ = ["Candidate", "Label", "LexicalIndexes"]
