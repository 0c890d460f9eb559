"""Synonymy for an extracted entity graph: names whose embeddings nearly coincide are merged.

OpenIE writes one entity many ways ('Houston Baptist University', 'Houston Baptist
University (HBU)', 'houston baptist univ.'); as separate nodes they connect nothing, and
HippoRAG's gains come partly from the synonymy edges that join them. A synonymy *edge* would
cost a third hop (passage -> entity -> synonym -> passage), beyond the planner's two, so the
names are merged into one node instead: every pair at cosine >= the threshold is joined,
transitively (union-find). Measured on hipporag_musique (benchmarks/README.md, multi-hop):
0.9 merges 16,661 names into groups that link 1,681 shared entities (1,464 without); at 0.8
chains of near pairs start to join unrelated names and Recall@5 falls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

SYNONYM_THRESHOLD = 0.9
_BLOCK = 2000  # rows of the similarity matrix computed at once (2000 x n float32)

Embed = Callable[[Sequence[str]], np.ndarray]


def synonym_groups(names: Sequence[str], embed: Embed, threshold: float) -> list[int]:
    """For each name, the index of its group; names at cosine >= `threshold` share one.

    Deterministic: a group's index is the position of its first member in `names`.
    """
    if not names:
        return []
    vectors = np.asarray(embed(names), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1, norms)
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for start in range(0, len(names), _BLOCK):
        similar = vectors[start : start + _BLOCK] @ vectors.T >= threshold
        for row, col in zip(*np.nonzero(similar), strict=True):
            a, b = root(start + int(row)), root(int(col))
            if a != b:
                parent[max(a, b)] = min(a, b)  # the earliest member is the root
    return [root(i) for i in range(len(names))]
