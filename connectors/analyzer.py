"""The lexical analyzer: text to BM25 terms, one implementation for every backend.

Every lexical leg indexes the terms this module produces and looks queries up by them, so the
same text gives the same terms, lengths and BM25 scores on SQLite and on PostgreSQL
(docs/adr/0013-one-lexical-analyzer.md). A backend's own analyzer (FTS5's porter tokenizer,
PostgreSQL's `english` text search configuration) splits, drops and stems differently, and
the embedded and server profiles would then rank the same corpus differently.

Terms are lower-cased runs of Unicode letters and digits (`_` separates words), without
stopwords and over-long runs (encoded blobs), stemmed with the Snowball English stemmer
(Porter2). A chunk's length is its number of terms, stopwords not counted (as in Lucene).

A joined identifier (`KEP-5100`, `PAY-1234`, `CK-666`: ASCII letters and digits joined by
`-` or `.`, with a letter and a run of three digits) is one more term, whole and
lower-cased, beside its parts. Its parts alone find every chunk that holds `kep` and, anywhere,
`5100` (a year, a port, an issue number); the whole term finds the chunk that writes it, so
the exact-match rule (`uda.query.exact`) sees that chunk among the lexical leg's. It adds
nothing to a chunk's length, so a query without one scores as it did before (ADR 41).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Protocol, cast

import Stemmer

# Bump when the terms a text yields change: stores indexed with another version re-index.
ANALYZER_VERSION = "uda-english-2"  # 2: joined identifiers
MAX_TERM_CHARS = 64

# Lucene's English stop set plus question words, which carry no topic in a question.
_STOPWORD_TEXT = """
    a an and are as at be but by can did do does for from has have how if in into is it its
    no not of on or such that the their then there these they this to was were what when
    where which who why will with
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"[^\W_]+")  # `_` separates: connection_pool ~ "connection pool"
# PyStemmer's stemmer objects are not safe to share between threads.
_local = threading.local()


class _Stemmer(Protocol):
    """What we use of PyStemmer's stemmer (the package ships no type information)."""

    def stemWords(self, words: list[str]) -> list[str]: ...


def _stem_words(words: list[str]) -> list[str]:
    stemmer: _Stemmer | None = getattr(_local, "stemmer", None)
    if stemmer is None:
        # PyStemmer ships no type information; its stemmers have `stemWords` (the cast).
        made = Stemmer.Stemmer("english")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        stemmer = _local.stemmer = cast("_Stemmer", made)
    return stemmer.stemWords(words)


def _words(text: str) -> list[str]:
    return [
        w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) <= MAX_TERM_CHARS
    ]


# Each lower-cased word seen, with its term (None: a stopword or an over-long run). A corpus
# repeats its words: one lookup a word replaces the stopword test and the stemmer's call,
# a third of a chunk's analysis. Filled up to a bound, never emptied (a reader never misses a
# word it just learned); words past the bound are analysed each time.
_WORD_TERMS: dict[str, str | None] = {}
_WORD_TERMS_MAX = 1_000_000


def _word_terms(text: str) -> list[str]:
    """The word terms of `text`, in order: `_stem_words(_words(text))`, through the cache."""
    words = _WORD.findall(text.lower())
    known = _WORD_TERMS
    unknown = {w for w in words if w not in known}
    if not unknown:
        return [term for term in map(known.__getitem__, words) if term is not None]
    kept = [w for w in unknown if w not in STOPWORDS and len(w) <= MAX_TERM_CHARS]
    learned: dict[str, str | None] = dict.fromkeys(unknown)
    learned.update(zip(kept, _stem_words(kept), strict=True))
    if len(known) < _WORD_TERMS_MAX:
        known.update(learned)
    terms = (learned[w] if w in learned else known[w] for w in words)
    return [term for term in terms if term is not None]


# A match starts only where a run of letters and digits does, and a run is never given back:
# tried at every position of every word, with backtracking, it cost an ingest more than the
# rest of the analysis (0.11 ms of 0.27 ms a 1,000-character chunk; 0.05 ms now), for the
# same matches.
_JOINED = re.compile(r"(?<![0-9A-Za-z])[0-9A-Za-z]++(?:[-.][0-9A-Za-z]++)+")
_LETTER = re.compile(r"[A-Za-z]")
_THREE_DIGITS = re.compile(r"[0-9]{3}")


def _joined(text: str) -> list[str]:
    """The joined identifiers of `text`, lower-cased (never stemmed: they are names).

    Only the whitespace-separated words that hold a `-` or a `.` are searched: a match holds
    neither whitespace nor, at its edges, what could extend it, so it is the same match in
    its word as in the text (a third of the time of searching the whole text).
    """
    return [
        token.lower()
        for word in text.split()
        if "-" in word or "." in word
        for token in _JOINED.findall(word)
        if len(token) <= MAX_TERM_CHARS and _LETTER.search(token) and _THREE_DIGITS.search(token)
    ]


def is_joined(term: str) -> bool:
    """Whether a term is a joined identifier (a word term never holds `-` or `.`)."""
    return "-" in term or "." in term


def chunk_length(terms: Mapping[str, int]) -> int:
    """A chunk's BM25 length: its word terms.

    Joined identifiers add none, so a query without one scores as before they were terms.
    """
    return sum(n for term, n in terms.items() if not is_joined(term))


# The same rule for term rows in SQL (`term` a column): what `chunk_length` counts.
WORD_TERM_SQL = "term NOT LIKE '%-%' AND term NOT LIKE '%.%'"  # SQLite and PostgreSQL


def term_frequencies(*texts: str) -> Counter[str]:
    """Each term of the texts (a chunk's name and text) with its number of occurrences."""
    terms: Counter[str] = Counter()
    for text in texts:
        terms.update(_word_terms(text))
        terms.update(_joined(text))
    return terms


def query_terms(query: str) -> list[str]:
    """The distinct terms of a query, in order of first occurrence (joined ones last)."""
    return list(dict.fromkeys(_stem_words(_words(query)) + _joined(query)))
