"""The one lexical analyzer, and the SQLite store's move onto it (ADR 13)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from connectors import analyzer
from connectors.analyzer import (
    ANALYZER_VERSION,
    MAX_TERM_CHARS,
    STOPWORDS,
    chunk_length,
    query_terms,
    term_frequencies,
)
from connectors.contract.records import OPEN, ChunkRecord, SearchFilter
from connectors.sqlite.connector import SQLiteConnector

PUBLIC = SearchFilter(max_sensitivity_rank=0)


def test_terms_are_stemmed_lowercased_words_without_stopwords() -> None:
    terms = term_frequencies("Running runners RUN", "the Glaciers of the glacier")
    assert terms == {"run": 2, "runner": 1, "glacier": 2}
    assert not STOPWORDS & set(terms)


def test_underscores_and_punctuation_separate_words() -> None:
    assert term_frequencies("connection_pool; ADR-3 (über)") == {
        "connect": 1,
        "pool": 1,
        "adr": 1,
        "3": 1,
        "über": 1,
    }


def test_a_joined_identifier_is_a_term_beside_its_parts() -> None:
    assert term_frequencies("# KEP-5100: DSR, see PAY-1234.") == {
        "kep": 1,
        "5100": 1,
        "dsr": 1,
        "see": 1,
        "pay": 1,
        "1234": 1,
        "kep-5100": 1,
        "pay-1234": 1,
    }
    assert query_terms("KEP-5100") == ["kep", "5100", "kep-5100"]
    # The whole term adds nothing to BM25's length: other queries score as before.
    assert chunk_length(term_frequencies("# KEP-5100: DSR")) == 3
    # Not identifiers: no letter (a date), no run of three digits (a version, IL-6).
    for text in ("2020-09-11", "v1.2.3", "IL-6", "e.g.", "kubernetes.io"):
        assert not [t for t in term_frequencies(text) if "-" in t or "." in t], text


# What a joined identifier's candidate is, written plainly; the analyzer's pattern is a faster
# spelling of it (one attempt per run, no backtracking) and must find exactly the same.
_JOINED_AS_SPECIFIED = re.compile(r"[0-9A-Za-z]+(?:[-.][0-9A-Za-z]+)+")


@given(st.text(alphabet="aZ09-._ é\n", max_size=40))
def test_joined_candidates_are_those_of_the_plain_pattern(text: str) -> None:
    found = analyzer._JOINED.findall(text)  # pyright: ignore[reportPrivateUsage]
    assert found == _JOINED_AS_SPECIFIED.findall(text)


@given(st.text(alphabet="aZ09-._ é\n\t\u00a0", max_size=60))
def test_joined_identifiers_are_searched_word_by_word_as_in_the_whole_text(text: str) -> None:
    whole = [
        token.lower()
        for token in _JOINED_AS_SPECIFIED.findall(text)
        if len(token) <= MAX_TERM_CHARS
        and re.search("[A-Za-z]", token)
        and re.search("[0-9]{3}", token)
    ]
    assert analyzer._joined(text) == whole  # pyright: ignore[reportPrivateUsage]


_WORDS = st.sampled_from(["Running", "runs", "the", "Über", "x" * 70, "harbour", "KEP-5100"])


@given(st.lists(st.lists(_WORDS, max_size=12).map(" ".join), min_size=1, max_size=5))
def test_word_terms_through_the_cache_are_the_stemmed_words(texts: list[str]) -> None:
    """Words met for the first time, again, and both in one text: the same terms in order."""
    for text in texts:
        expected = analyzer._stem_words(analyzer._words(text))  # pyright: ignore[reportPrivateUsage]
        assert analyzer._word_terms(text) == expected  # pyright: ignore[reportPrivateUsage]


def test_overlong_runs_are_not_terms() -> None:
    blob = "x" * (MAX_TERM_CHARS + 1)
    assert term_frequencies(f"{blob} harbour") == {"harbour": 1}


def test_query_terms_are_distinct_in_order_and_syntax_free() -> None:
    assert query_terms('How do "volume snapshots" work? snapshot OR NEAR(x)') == [
        "volum",
        "snapshot",
        "work",
        "near",
        "x",
    ]
    assert query_terms("the and of") == []
    assert query_terms("\x00 \ud800 %_'") == []


def _chunk(cid: str, text: str) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=cid,
        element_id=cid.split("@")[0],
        version=1,
        index=0,
        element_type="Document",
        sensitivity_rank=0,
        scope=None,
        valid_from=1,
        valid_to=OPEN,
        filter_values={},
        name=cid,
        text=text,
        embedding=None,
    )


async def test_an_fts5_store_of_an_earlier_release_is_reindexed(tmp_path: Path) -> None:
    path = tmp_path / "uda.sqlite3"
    store = SQLiteConnector(path)
    await store.connect()
    await store.upsert_text_chunks(
        [_chunk("glacier@1#0", "Glaciers retreat."), _chunk("harbour@1#0", "Ships wait.")]
    )
    await store.close()

    # Turn it into a store as earlier releases left it: an FTS5 index, no terms or postings.
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(
        """
        DROP TABLE text_postings_rows;
        DROP TABLE text_postings;
        UPDATE text_chunks SET term_freqs = NULL;
        DELETE FROM meta WHERE key IN ('text_analyzer', 'lexical_postings');
        CREATE VIRTUAL TABLE text_fts USING fts5(
            name, text, content='text_chunks', content_rowid='rowid');
        CREATE TRIGGER text_chunks_ai AFTER INSERT ON text_chunks BEGIN
            INSERT INTO text_fts (rowid, name, text) VALUES (new.rowid, new.name, new.text);
        END;
        CREATE VIRTUAL TABLE text_vocab USING fts5vocab(text_fts, 'instance');
        """
    )
    db.close()

    again = SQLiteConnector(path)
    await again.connect()
    try:
        hits = await again.text_search("glacier", 5, PUBLIC)
        assert [h.chunk_id for h in hits] == ["glacier@1#0"]
        assert await again.text_index_drift() == 0
        await again.upsert_text_chunks([_chunk("orchard@1#0", "Apple trees.")])
        assert [h.chunk_id for h in await again.text_search("apples", 5, PUBLIC)] == ["orchard@1#0"]
    finally:
        await again.close()
    db = sqlite3.connect(path)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert not {"text_fts", "text_vocab", "text_chunks_ai"} & names
    assert db.execute("SELECT value FROM meta WHERE key = 'text_analyzer'").fetchone() == (
        ANALYZER_VERSION,
    )
    db.close()
