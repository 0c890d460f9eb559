"""Embedders without a model: the write path and search measured without the model's cost.

The scale suites fill stores of tens or hundreds of thousands of passages; a real model on
two cores would spend hours on them. These embedders cost microseconds a text, are seeded
(the same text gets the same vector in every run and process), and differ in the one thing
a vector index cares about, how the vectors lie:

- `RandomEmbedder` ("random"): a seeded random unit vector per distinct text, as issue 42
  measured. No two texts are nearer than chance, which no trained model produces, and which
  is the worst case for an HNSW index: every distance is about the same, so its greedy
  search finds little to follow (at 30,000 passages, Chroma's settings and an `ef_search`
  of 400: recall@100 0.58 against an exact scan, and 2.1 ms of CPU per vector added at the
  end of the fill against 0.64 ms for "hashed"; docs/adr/0061).
- `HashedWordsEmbedder` ("hashed"): the text's words counted into 4,096 hashed buckets and
  projected to 384 dimensions by a fixed seeded Gaussian matrix, then unit length. Texts
  that share words lie near each other, as a real model's vectors of related texts do (a
  random projection keeps cosines on average), so an HNSW index meets neighbourhoods to
  follow (recall@100 0.86 for keywords and 0.91 for questions at the same settings; the
  model's own vectors gave 0.98 and 0.99 at 10,000). It is not a model: which texts are near
  is decided by shared words, not by meaning.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

DIMENSION = 384
_BUCKETS = 4096
_PROJECTION_SEED = 7
_WORD = re.compile(r"\w+")

Vectors = npt.NDArray[np.float32]


class RandomEmbedder:
    """Seeded random unit vectors, one per distinct text: search and writes without a model."""

    dimension = DIMENSION
    fingerprint = f"random-{DIMENSION}d"

    def _vector(self, text: str) -> Vectors:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        vector = rng.standard_normal(DIMENSION).astype(np.float32)
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One vector per text."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> Vectors:
        """The query's vector."""
        return self._vector(text)


class HashedWordsEmbedder:
    """Hashed bags of words under a fixed random projection: near when words are shared."""

    dimension = DIMENSION
    fingerprint = f"hashed-words-{_BUCKETS}-{DIMENSION}d"

    def __init__(self) -> None:
        rng = np.random.default_rng(_PROJECTION_SEED)
        self._projection = rng.standard_normal((_BUCKETS, DIMENSION)).astype(np.float32)

    def _vector(self, text: str) -> Vectors:
        # crc32, not hash(): the same bucket in every process whatever PYTHONHASHSEED says.
        buckets = [zlib.crc32(w.encode("utf-8", "surrogatepass")) % _BUCKETS for w in _words(text)]
        vector = self._projection[buckets or [0]].sum(axis=0)
        norm = float(np.linalg.norm(vector))
        return (vector / norm if norm else vector).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One vector per text."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> Vectors:
        """The query's vector."""
        return self._vector(text)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


EMBEDDERS = {"random": RandomEmbedder, "hashed": HashedWordsEmbedder}
"""The model-free embedders by the name the suites' `--vectors` option takes."""

__all__ = ["DIMENSION", "EMBEDDERS", "HashedWordsEmbedder", "RandomEmbedder"]
