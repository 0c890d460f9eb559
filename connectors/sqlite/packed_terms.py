"""Each chunk's term frequencies packed in one BLOB, for scoring a few hundred candidates.

The engine path scores its candidates exactly (ADR 50). Reading their frequencies from
`chunk_terms` is one B-tree probe per (candidate, query term): about 2 µs each, 5 ms for 200
candidates and a 12-word question. A chunk's terms as one BLOB of `(term id, tf)` pairs,
the ids from `lexicon`, are one row-id lookup per candidate, and numpy picks the query
terms out of all of them at once.

The pairs are little-endian uint32, sorted by term id. A write packs them from the
analyser's counts it already has; a migration or rebuild from `chunk_terms`, which the
exhaustive path and the statistics still read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

PAIR = np.dtype("<u4")

_ADD_TERMS = "INSERT OR IGNORE INTO lexicon (term) SELECT value FROM json_each(?)"
_TERM_IDS = "SELECT term, id FROM lexicon WHERE term IN (SELECT value FROM json_each(?))"
_ALL_PAIRS = """
SELECT c.doc, l.id, c.tf FROM chunk_terms c JOIN lexicon l ON l.term = c.term
ORDER BY c.doc, l.id
"""
_SET = "UPDATE text_chunks SET term_freqs = ? WHERE rowid = ?"


def ensure_column(conn: sqlite3.Connection) -> bool:
    """Add `text_chunks.term_freqs` to a store made before it; whether it was added."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(text_chunks)")}
    if "term_freqs" in columns:
        return False
    conn.execute("ALTER TABLE text_chunks ADD COLUMN term_freqs BLOB")
    return True


def store(conn: sqlite3.Connection, chunks: Mapping[int, Mapping[str, int]]) -> None:
    """Pack the term frequencies of these chunk rows (row id -> the analyser's terms)."""
    if not chunks:
        return
    terms = json.dumps(sorted({term for counts in chunks.values() for term in counts}))
    conn.execute(_ADD_TERMS, (terms,))
    ids: dict[str, int] = dict(conn.execute(_TERM_IDS, (terms,)))
    conn.executemany(
        _SET,
        [
            (_pack(sorted((ids[term], tf) for term, tf in counts.items())), doc)
            for doc, counts in chunks.items()
        ],
    )


def store_all(conn: sqlite3.Connection) -> None:
    """Pack every row's term frequencies from `chunk_terms` (a migration, a rebuild)."""
    conn.execute("INSERT OR IGNORE INTO lexicon (term) SELECT DISTINCT term FROM chunk_terms")
    packed: list[tuple[bytes, int]] = []
    last = -1
    pairs: list[tuple[int, int]] = []
    for doc, term_id, tf in conn.execute(_ALL_PAIRS):
        if doc != last:
            if last >= 0:
                packed.append((_pack(pairs), last))
            last, pairs = doc, []
        pairs.append((term_id, tf))
        if len(packed) >= 10_000:  # a store's rows do not fit in memory at once
            conn.executemany(_SET, packed)
            packed = []
    if last >= 0:
        packed.append((_pack(pairs), last))
    conn.executemany(_SET, packed)


def _pack(pairs: Sequence[tuple[int, int]]) -> bytes:
    """(term id, tf) pairs, sorted by id, as little-endian uint32s."""
    return np.asarray(pairs, dtype=PAIR).tobytes()


def scores(
    packed: bytes,
    sizes: Sequence[int],
    lengths: npt.NDArray[np.float64],
    weights: dict[int, float],
    k1: float,
    b: float,
    average_length: float,
) -> npt.NDArray[np.float64]:
    """BM25 of each packed chunk for terms weighted by idf (`connectors.bm25`'s formula).

    `packed` is the chunks' BLOBs one after the other, `sizes` their sizes in bytes (as one
    statement reads them: `CANDIDATES_SQL` in `connectors.sqlite.lexical_engine`).
    """
    out = np.zeros(len(sizes), dtype=np.float64)
    if not sizes or not weights:
        return out
    counts = np.asarray(sizes, dtype=np.int64) // PAIR.itemsize // 2
    pairs = np.frombuffer(packed, dtype=PAIR).reshape(-1, 2)
    if len(pairs) != int(counts.sum()):
        raise ValueError(f"packed term frequencies: {len(pairs)} pairs, sizes say {counts.sum()}")
    owner = np.repeat(np.arange(len(sizes)), counts)
    wanted = np.fromiter(sorted(weights), dtype=np.int64)
    idf = np.fromiter((weights[int(t)] for t in wanted), dtype=np.float64)
    hit = np.isin(pairs[:, 0], wanted)
    tf = pairs[hit, 1].astype(np.float64)
    doc = owner[hit]
    term_idf = idf[np.searchsorted(wanted, pairs[hit, 0])]
    norm = tf + k1 * (1 - b + b * lengths[doc] / average_length)
    out += np.bincount(doc, weights=term_idf * tf * (k1 + 1) / norm, minlength=len(sizes))
    return out
