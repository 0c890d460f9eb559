"""The embedded store's vectors in one matrix, searched exactly while the store is small.

Chroma's HNSW query costs 3-6 ms at 10,000-30,000 chunks on a two-core machine and misses
some of the true nearest (recall@100 0.984 for keyword queries on 10,000 MiniLM chunks at
`ef_search` 400); one float32 matrix product over the same vectors takes 0.4-1.5 ms at
10,000 and misses none (docs/adr/0062-small-stores-are-searched-exactly.md). The chunk directory
keeps every chunk's vector beside its filter fields while the store is small
(`connectors.chroma.directory`), so a store of up to `FLAT_LIMIT` chunks is loaded from it
once, by the first search, and searched here; larger stores, and stores whose directory rows
lack vectors, are searched by Chroma as before.

A `FlatIndex` is immutable: writes make a new one (`with_chunks`, `without`), which the
connector swaps in, so a search on another thread keeps the one it started with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FLAT_LIMIT = 20_000
"""Chunks up to which the embedded store searches exactly (30 MB of float32 at 384 dims)."""

Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class FlatIndex:
    """Chunk ids and their unit-length vectors, row by row."""

    ids: tuple[str, ...]
    vectors: Matrix

    @classmethod
    def of(cls, ids: Sequence[str], vectors: Sequence[bytes]) -> FlatIndex:
        """From ids and their stored float32 BLOBs."""
        if not ids:
            return cls((), np.zeros((0, 0), dtype=np.float32))
        matrix = np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(ids), -1)
        return cls(tuple(ids), _unit(matrix))

    def __len__(self) -> int:
        return len(self.ids)

    def nearest(self, query: Sequence[float], n: int) -> tuple[list[str], list[float]]:
        """The `n` nearest ids and their cosine distances (Chroma's `1 - cos`), nearest first.

        Ties keep the order the chunks were written in.
        """
        if not self.ids or n <= 0:
            return [], []
        # einsum, not `@`: numpy hands `@` to its BLAS, which splits it over every core and
        # leaves those threads spinning after it; measured at 10,000 chunks, that doubled a
        # search's CPU (29 -> 41 ms) for 0.6 ms of wall time saved on an idle machine.
        similarity = np.einsum("ij,j->i", self.vectors, _unit_query(query, self.vectors.shape[1]))
        n = min(n, len(similarity))
        if n < len(similarity):
            top = np.argpartition(-similarity, n - 1)[:n]
            top = top[np.lexsort((top, -similarity[top]))]
        else:
            top = np.lexsort((np.arange(len(similarity)), -similarity))
        return [self.ids[i] for i in top.tolist()], (1.0 - similarity[top]).tolist()

    def with_chunks(self, ids: Sequence[str], vectors: Sequence[Sequence[float]]) -> FlatIndex:
        """This index with these chunks added (ids it holds already are left as they are)."""
        held = set(self.ids)
        fresh = [i for i, cid in enumerate(ids) if cid not in held]
        if not fresh:
            return self
        added = _unit(np.asarray([vectors[i] for i in fresh], dtype=np.float32))
        matrix = added if not self.ids else np.concatenate([self.vectors, added])
        return FlatIndex((*self.ids, *(ids[i] for i in fresh)), matrix)

    def only(self, ids: Sequence[str]) -> FlatIndex:
        """This index with only these chunks (in its own order)."""
        wanted = set(ids)
        keep = [i for i, cid in enumerate(self.ids) if cid in wanted]
        return FlatIndex(tuple(self.ids[i] for i in keep), self.vectors[keep])

    def without(self, ids: Sequence[str]) -> FlatIndex:
        """This index without these chunks."""
        doomed = set(ids)
        keep = [i for i, cid in enumerate(self.ids) if cid not in doomed]
        if len(keep) == len(self.ids):
            return self
        return FlatIndex(tuple(self.ids[i] for i in keep), self.vectors[keep])


class FlatNearest:
    """An exact index answering as Chroma's query does (`connectors.chroma.directory_search`)."""

    def __init__(self, index: FlatIndex) -> None:
        self._index = index

    def query(self, embedding: list[float], n: int) -> dict[str, Any]:
        """The `n` nearest of every chunk, exactly."""
        ids, distances = self._index.nearest(embedding, n)
        return {"ids": [ids], "distances": [distances]}

    def within(self, embedding: list[float], ids: list[str], n: int) -> dict[str, Any]:
        """The `n` nearest among `ids`, exactly."""
        return FlatNearest(self._index.only(ids)).query(embedding, n)


def _unit(matrix: Matrix) -> Matrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _unit_query(query: Sequence[float], dimension: int) -> Matrix:
    vector = np.asarray(query, dtype=np.float32)
    if vector.shape != (dimension,):
        raise ValueError(f"query has {vector.size} dimensions, the store {dimension}")
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


__all__ = ["FLAT_LIMIT", "FlatIndex", "FlatNearest"]
