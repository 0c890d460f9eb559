"""The SQLite text leg's exhaustive path: every visible chunk that holds a query term, scored.

It serves what the engine's indexes cannot (`as_of` reads, value filters, an index that is
behind; ADR 50) and is the reference the engine path is held to. FTS5 finds the chunks that
hold any query term (`connectors.sqlite.postings`), current or not; the filter keeps the
visible ones, in the same statement; their packed frequencies (`packed_terms`) give each
term's document frequency among them and every score at once, with `connectors.bm25`'s
formula and tie order (`bm25_top` is the reference the tests hold this to). The matches are
read a range of row ids at a time, so that a common term over a large store never holds
every BLOB at once; only the best `k`, and the chunks tied with the last of them, are read whole.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from connectors.bm25 import BM25_B, BM25_K1
from connectors.sqlite import packed_terms, postings
from connectors.sqlite.json_rows import json_array_rows, read_json_rows

_PAGE_ROWS = 20_000  # row ids a page: at most about 15 MB of BLOBs
_WHOLE_ROWS = f"""
SELECT {json_array_rows("t.rowid, t.chunk_id, t.element_id, t.version, t.text")}
FROM text_chunks t WHERE t.rowid IN (SELECT value FROM json_each(?))
"""  # noqa: S608 - fixed fragments only


def best_chunks(
    conn: sqlite3.Connection,
    terms: Sequence[str],
    where: str,
    params: Sequence[Any],
    n_docs: int,
    avg_len: float,
    k: int,
) -> list[tuple[str, str, int, str, float]]:
    """The `k` best visible chunks as `(chunk_id, element_id, version, text, score)`.

    `where` and `params` are the filter (over `text_chunks t`); `n_docs` and `avg_len` the
    visible chunks' count and mean length.
    """
    term_ids = packed_terms.known_term_ids(conn, terms)
    if not term_ids or k <= 0:
        return []
    rowids: list[int] = []
    pages = _matching_pages(conn, postings.any_of(term_ids), where, params, rowids)
    scores = packed_terms.scores_counting_frequencies(
        pages, term_ids, n_docs, BM25_K1, BM25_B, avg_len
    )
    chosen = np.flatnonzero(scores > 0)
    if len(chosen) > k:
        # The k-th best score, and every chunk at least as good: ties are cut by chunk id,
        # which only the rows read whole carry.
        kth = np.partition(scores[chosen], len(chosen) - k)[len(chosen) - k]
        chosen = chosen[scores[chosen] >= kth]
    score_of = {rowids[i]: float(scores[i]) for i in chosen.tolist()}
    if not score_of:
        return []
    whole = read_json_rows(conn, _WHOLE_ROWS, (json.dumps(list(score_of)),))
    best = [(c, e, int(v), t, score_of[rid]) for rid, c, e, v, t in whole]
    best.sort(key=lambda row: (-row[4], row[0]))
    return best[:k]


def _matching_pages(
    conn: sqlite3.Connection,
    query: str,
    where: str,
    params: Sequence[Any],
    rowids: list[int],
) -> Iterator[packed_terms.Page]:
    """The visible matching chunks, a range of row ids at a time; their ids into `rowids`."""
    sql = postings.MATCHING_SQL.format(where=where)
    (last,) = conn.execute("SELECT max(rowid) FROM text_chunks").fetchone()
    for after in range(0, last or 0, _PAGE_ROWS):
        found, lengths, sizes, packed = conn.execute(
            sql, (query, after, after + _PAGE_ROWS, *params)
        ).fetchone()
        visible: list[int] = json.loads(found)
        if visible:
            rowids += visible
            yield packed_terms.Page(packed or b"", json.loads(sizes), json.loads(lengths))
