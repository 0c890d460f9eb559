"""Embedders for the runs: one model, each text embedded once per process.

`CachingEmbedder` wraps the packaged MiniLM (`uda.client.shared_embedder`) and remembers
every document vector by its exact text, so the same corpus ingested into the embedded and
the server profile, and the numpy floor over the same passages, pay for the model once.
Query vectors are cached by the wrapped embedder itself; `uncached_query` measures a query
embedding that no cache answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from uda.client import shared_embedder
from uda.embedder import Embedder, SentenceTransformerEmbedder, Vector


class CachingEmbedder:
    """An `Embedder` that embeds each distinct document text once (and counts what it did)."""

    def __init__(self, inner: SentenceTransformerEmbedder | None = None) -> None:
        self._inner = inner or shared_embedder()
        self._documents: dict[str, Vector] = {}
        self._lock = threading.Lock()
        self.embedded = 0
        self.seconds = 0.0

    @property
    def inner(self) -> SentenceTransformerEmbedder:
        """The model underneath."""
        return self._inner

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        return self._inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """Unit vectors of `texts`, from the cache where seen before."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._documents))
        if missing:
            started = time.perf_counter()
            vectors = self._inner.embed_documents(missing)
            with self._lock:
                self.seconds += time.perf_counter() - started
                self.embedded += len(missing)
                self._documents.update(zip(missing, vectors, strict=True))
        with self._lock:
            return np.stack([self._documents[t] for t in texts]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vector:
        """The query's vector (cached by the wrapped embedder)."""
        return self._inner.embed_query(text)

    def uncached_query(self, text: str) -> Vector:
        """Embed a query through the model, never from a cache (to time the real cost)."""
        return self._inner.embed_documents([text])[0]


def warm_queries(embedder: Embedder, queries: Sequence[str]) -> None:
    """Embed every query once, so that timed searches exclude the model."""
    for query in queries:
        embedder.embed_query(query)
