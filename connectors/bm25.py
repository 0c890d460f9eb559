"""BM25 scoring as a pure function (the lexical leg's arithmetic).

A connector supplies the term occurrences of the *visible* chunks only (terms from
`connectors.analyzer`); everything here is plain data in, plain data out.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

# Lucene's BM25 with Anserini's defaults (k1 0.9, b 0.4) rather than Lucene's own (1.2, 0.75):
# a chunk is already a passage of bounded length, so its length says less about verbosity
# than a whole document's would, and a saturating term frequency suits short passages.
# Chosen on SciFact's train split (ADR 42); every other suite was checked, not consulted.
BM25_K1 = 0.9
BM25_B = 0.4


def bm25_top(
    rows: Sequence[tuple[int, str, int, int, str]], n_docs: int, avg_len: float, k: int
) -> list[tuple[int, str, float]]:
    """The `k` best `(rowid, chunk_id, score)` by BM25 (Lucene idf) from term occurrences.

    `rows` are `(rowid, term, tf, length, chunk_id)` of visible chunks only; document
    frequencies are counted from them, so hidden chunks weigh nothing.
    """
    df: dict[str, int] = {}
    for _, term, _, _, _ in rows:
        df[term] = df.get(term, 0) + 1
    idf = {t: math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    scores: dict[int, float] = {}
    chunk_ids: dict[int, str] = {}
    for doc, term, tf, length, chunk in rows:
        norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avg_len)
        scores[doc] = scores.get(doc, 0.0) + idf[term] * tf * (BM25_K1 + 1) / norm
        chunk_ids[doc] = chunk
    ranked = heapq.nsmallest(k, scores, key=lambda d: (-scores[d], chunk_ids[d]))
    return [(doc, chunk_ids[doc], scores[doc]) for doc in ranked]
