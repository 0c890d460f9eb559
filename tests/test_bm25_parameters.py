"""The lexical leg's BM25 parameters: Anserini's k1 0.9 and b 0.4 (ADR 42).

Hand-computed scores pin the arithmetic every lexical backend shares (`connectors.bm25`;
the SQLite and PostgreSQL legs are checked against it in their own tests), so a change of
the parameters is a decision with its own record, not an accident.
"""

from __future__ import annotations

import math

import pytest

from connectors.bm25 import BM25_B, BM25_K1, bm25_top


def test_the_parameters_are_the_recorded_ones() -> None:
    assert (BM25_K1, BM25_B) == (0.9, 0.4)


def test_scores_are_lucene_bm25_with_those_parameters() -> None:
    # Ten visible chunks of 10 terms on average; "harbour" occurs in two of them.
    rows = [(1, "harbour", 1, 5, "short"), (2, "harbour", 3, 20, "long")]
    ranked = bm25_top(rows, n_docs=10, avg_len=10.0, k=10)
    idf = math.log(1 + (10 - 2 + 0.5) / (2 + 0.5))  # 1.4816
    # short: tf 1, half the average length -> 1 + 0.9 * (0.6 + 0.4 * 0.5) = 1.72
    # long:  tf 3, twice the average length -> 3 + 0.9 * (0.6 + 0.4 * 2.0) = 4.26
    assert ranked == [
        (2, "long", pytest.approx(idf * 3 * 1.9 / 4.26)),
        (1, "short", pytest.approx(idf * 1 * 1.9 / 1.72)),
    ]
    assert ranked[0][2] == pytest.approx(1.98243, abs=1e-5)
    assert ranked[1][2] == pytest.approx(1.63666, abs=1e-5)


def test_a_repeated_term_saturates() -> None:
    # With k1 0.9 the tenth occurrence adds little: tf 10 scores under 1.9x tf 1 at equal length.
    one = bm25_top([(1, "t", 1, 10, "a")], n_docs=5, avg_len=10.0, k=1)[0][2]
    ten = bm25_top([(1, "t", 10, 10, "a")], n_docs=5, avg_len=10.0, k=1)[0][2]
    assert one < ten < 1.9 * one
