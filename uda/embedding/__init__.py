"""Embedders: the protocol (`Embedder`), its runtimes, and what they share.

- `onnx` (the default): the model run by ONNX Runtime, exported once into a cache keyed by
  the weights' fingerprint (docs/adr/0027-onnx-embedder.md).
- `sentence-transformers`: the same model run by torch, the reference.

Every embedder names its model by a fingerprint; a persistent cache keyed by (fingerprint,
text) keeps a text from being embedded twice (docs/adr/0028-embedder-fingerprints-and-cache.md).
"""

from uda.embedding.base import Embedder, Vector, packaged_model_path, weights_fingerprint
from uda.embedding.sentence_transformers import SentenceTransformerEmbedder

__all__ = [
    "Embedder",
    "SentenceTransformerEmbedder",
    "Vector",
    "packaged_model_path",
    "weights_fingerprint",
]
