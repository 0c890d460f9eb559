"""Loaders: turn real sources into ontology elements and relations, without any model call.

from uda.loaders import load_repository
src = load_repository("path/to/repo")
client.ingest(src.elements, src.relations)
"""

from __future__ import annotations

from uda.loaders.files import MAX_FILE_BYTES, SkippedFile, SkipReason
from uda.loaders.repository import LoadedSource, load_repository

__all__ = ["MAX_FILE_BYTES", "LoadedSource", "SkipReason", "SkippedFile", "load_repository"]
