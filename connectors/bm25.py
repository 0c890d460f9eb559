"""BM25 scoring and query words, as pure functions (the lexical leg's arithmetic).

The SQLite connector supplies term occurrences of the *visible* chunks only; everything here
is plain data in, plain data out.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Sequence

BM25_K1 = 1.2
BM25_B = 0.75

# Words too common to help BM25; dropping them keeps the FTS5 match set small.
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "how",
        "do",
        "does",
        "did",
        "can",
    ]
)
_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(text: str) -> list[str]:
    r"""The distinct words of a query, without stopwords (unless nothing else is left).

    Words are `\\w+` runs: they cannot carry quotes or FTS5 operators.
    """
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    return [w for w in words if w not in _STOPWORDS] or words


def token_count(text: str) -> int:
    """Tokens of a text as the unicode61 tokenizer splits it (stemming keeps the count)."""
    return len(_WORD.findall(text))


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
