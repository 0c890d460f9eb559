"""Conformance of `TextCapable`: word matching, query text as data, filters, non-interference."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence

import pytest
import pytest_asyncio

from connectors.base import TextCapable
from connectors.conformance.data import (
    EDGE_FILTERS,
    FILTERS,
    HOSTILE_IDS,
    NO_TYPE_FILTERS,
    STRING_RANGE_FILTERS,
    chunk,
    filter_corpus,
    hit_view,
)
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, ChunkHit, ChunkRecord, SearchFilter

EVERYTHING = SearchFilter(max_sensitivity_rank=3, all_projects=True)
PUBLIC = SearchFilter(max_sensitivity_rank=0)

# The chunk names are the same word everywhere and never queried: a store may index the name
# or not.
TEXTS: dict[str, str] = {
    "t1": "glacier harbour",
    "t2": "glacier glacier glacier",
    "t3": "harbour lantern meadow",
    "t4": "orchard copper",
    "t5": "falcon quartz lantern",
    "t6": "glacier meadow copper",
}

# User text full of FTS and SQL syntax. Each must be treated as plain words.
HOSTILE_QUERIES: tuple[str, ...] = (
    '"',
    "*",
    "NEAR(",
    "OR",
    "'",
    "--",
    "",
    "   ",
    'glacier"',
    '"glacier',
    "glacier*",
    "glacier OR harbour",
    "glacier AND NOT harbour",
    "NEAR(glacier harbour)",
    "NEAR(glacier harbour, 2",
    "glacier' --",
    "(glacier",
    "^glacier",
    "glacier:",
    "text:glacier",
    "{name text}: glacier",
    "'; DROP TABLE text_chunks; --",
    "glacier & !harbour | lantern <-> meadow",
    "%glacier_",
    "\\glacier\\",
    "glacier + -harbour ~lantern",
)
_WORD = re.compile(r"[^\W_]+")  # letters and digits: `_` separates words, as in FTS5


def corpus() -> list[ChunkRecord]:
    """The small word corpus, public and current, status `visible`."""
    return [
        chunk(cid, text=text, filter_values={"status": "visible"}) for cid, text in TEXTS.items()
    ]


def check_text_hits(
    hits: Sequence[ChunkHit], stored: Mapping[str, ChunkRecord], search_filter: SearchFilter
) -> None:
    """Every hit is a stored chunk the filter allows, positive score, best first, once."""
    ids = [h.chunk_id for h in hits]
    assert len(ids) == len(set(ids)), f"a chunk returned twice: {ids}"
    for hit in hits:
        assert hit.chunk_id in stored, f"unknown chunk {hit.chunk_id!r}"
        record = stored[hit.chunk_id]
        assert (hit.element_id, hit.version) == (record.element_id, record.version)
        # A store may leave the text out (the planner reads it, ADR 53), never get it wrong.
        assert hit.text in (None, record.text), f"{hit.chunk_id!r}: not the chunk's text"
        assert search_filter.allows_chunk(record), f"{hit.chunk_id!r} does not pass {search_filter}"
        assert hit.score > 0, f"{hit.chunk_id!r}: score {hit.score} is not positive"
    scores = [h.score for h in hits]
    assert all(a >= b for a, b in itertools.pairwise(scores)), f"unsorted: {scores}"


def with_word(stored: Mapping[str, ChunkRecord], *words: str) -> set[str]:
    """Chunk ids whose text holds any of the words (case-insensitive, whole words)."""
    wanted = {w.lower() for w in words}
    return {cid for cid, c in stored.items() if wanted & {w.lower() for w in _WORD.findall(c.text)}}


class TextConformance(ConformanceBase):
    """Tests for connectors that claim `TextCapable` (skipped for the others)."""

    @pytest_asyncio.fixture
    async def text(self, harness: Harness) -> TextCapable:
        """A fresh connector as TextCapable, or a skip naming the capability."""
        return claim(await harness.new(), TextCapable)

    async def _text_filter_cases(
        self, text: TextCapable, harness: Harness, cases: Sequence[tuple[str, SearchFilter]]
    ) -> None:
        """Run every filter at several k; report every failing case at once."""
        chunks = filter_corpus(harness.dimension)
        stored = {c.chunk_id: c for c in chunks}
        await text.upsert_text_chunks(chunks)

        async def case(search_filter: SearchFilter, k: int) -> None:
            allowed = {c.chunk_id for c in chunks if search_filter.allows_chunk(c)}
            hits = await text.text_search("common", k, search_filter)
            check_text_hits(hits, stored, search_filter)
            assert len(hits) == min(k, len(allowed)), (
                f"{len(hits)} hits, {len(allowed)} chunks pass"
            )
            if k >= len(allowed):
                assert {h.chunk_id for h in hits} == allowed, "not every passing chunk found"

        failures: list[str] = []
        for label, search_filter in cases:
            for k in (3, 10, len(chunks)):
                try:
                    await case(search_filter, k)
                except Exception as exc:  # collect them all: one report names every case
                    failures.append(f"filter {label!r}, k={k}: {type(exc).__name__}: {exc}")
        assert not failures, "\n".join(failures)

    async def test_text_finds_chunks_with_the_query_words(self, text: TextCapable) -> None:
        """Hits are the chunks holding a query word (any case); none for unknown words."""
        chunks = corpus()
        stored = {c.chunk_id: c for c in chunks}
        await text.upsert_text_chunks(chunks)
        for query, words in (
            ("glacier", ["glacier"]),
            ("GLACIER", ["glacier"]),
            ("harbour", ["harbour"]),
            ("glacier harbour", ["glacier", "harbour"]),
            ("lantern copper", ["lantern", "copper"]),
        ):
            hits = await text.text_search(query, 10, PUBLIC)
            check_text_hits(hits, stored, PUBLIC)
            assert {h.chunk_id for h in hits} == with_word(stored, *words), query
        assert await text.text_search("zebra", 10, PUBLIC) == []

    async def test_text_ranks_denser_matches_first(self, text: TextCapable) -> None:
        """A chunk made of the query word outranks chunks that mention it once; k is honoured."""
        chunks = corpus()
        await text.upsert_text_chunks(chunks)
        hits = await text.text_search("glacier", 10, PUBLIC)
        assert hits[0].element_id == "t2", [h.element_id for h in hits]
        top = await text.text_search("glacier", 2, PUBLIC)
        assert len(top) == 2
        assert top[0].element_id == "t2"

    async def test_text_finds_the_chunk_that_writes_an_identifier(self, text: TextCapable) -> None:
        """`KEP-5100` ranks the chunk writing it above chunks with `kep` and `5100` apart."""
        chunks = [
            chunk("apart-1", text="Every KEP names owners. It merged in issue 5100 of 2021."),
            chunk("apart-2", text="KEP reviews, KEP owners, KEP approvers; port 5100, port 5100."),
            chunk("joined", text="The proposal itself: # KEP-5100: DSR and overlay support."),
        ]
        await text.upsert_text_chunks(chunks)
        hits = await text.text_search("KEP-5100", 3, PUBLIC)
        ranked = [h.element_id for h in hits]
        assert ranked[0] == "joined", ranked

    async def test_text_query_syntax_is_data(self, text: TextCapable) -> None:
        """FTS and SQL syntax in the query is searched as words: no error, sane hits."""
        chunks = corpus()
        stored = {c.chunk_id: c for c in chunks}
        await text.upsert_text_chunks(chunks)
        failures: list[str] = []
        for query in HOSTILE_QUERIES:
            try:
                hits = await text.text_search(query, 10, PUBLIC)
                check_text_hits(hits, stored, PUBLIC)
            except Exception as exc:  # collect them all: one report names every bad query
                failures.append(f"{query!r}: {type(exc).__name__}: {exc}")
                continue
            words = _WORD.findall(query)
            got = {h.chunk_id for h in hits}
            if not got <= with_word(stored, *words):
                failures.append(f"{query!r}: hits without any query word: {sorted(got)}")
            if "glacier" in query.lower() and not with_word(stored, "glacier") <= got:
                failures.append(f"{query!r}: misses chunks holding 'glacier': {sorted(got)}")
        assert not failures, "\n".join(failures)
        assert await text.text_chunk_states() == dict.fromkeys(stored, OPEN)
        again = await text.text_search("glacier", 10, PUBLIC)
        assert {h.chunk_id for h in again} == with_word(stored, "glacier")

    async def test_text_filter_semantics_match_reference(
        self, text: TextCapable, harness: Harness
    ) -> None:
        """Clearance, scope, validity, as_of, types and predicates equal `allows_chunk`."""
        await self._text_filter_cases(text, harness, FILTERS)

    async def test_text_filter_edge_cases(self, text: TextCapable, harness: Harness) -> None:
        """`projects` beside `all_projects`, `in` over numbers and booleans, empty ranges."""
        await self._text_filter_cases(text, harness, EDGE_FILTERS)

    async def test_text_filter_without_element_types(
        self, text: TextCapable, harness: Harness
    ) -> None:
        """`element_types=()` allows no chunk at all (None is the filter that allows all)."""
        await self._text_filter_cases(text, harness, NO_TYPE_FILTERS)

    async def test_text_filter_string_ranges(self, text: TextCapable, harness: Harness) -> None:
        """`$gt`/`$gte`/`$lt`/`$lte` on strings compare them as strings."""
        await self._text_filter_cases(text, harness, STRING_RANGE_FILTERS)

    async def test_text_hidden_chunks_do_not_change_visible_scores(self, text: TextCapable) -> None:
        """Adding chunks the filter hides changes neither the visible hits nor their scores."""
        visible = corpus()
        await text.upsert_text_chunks(visible)
        search_filter = SearchFilter(
            max_sensitivity_rank=0,
            element_types=("Document",),
            predicates=(Predicate(field="status", op=Op.EQ, value="visible"),),
        )
        queries = ("glacier", "harbour lantern", "glacier harbour meadow", "copper")
        before = [await text.text_search(q, 10, search_filter) for q in queries]
        long_text = "glacier harbour lantern meadow copper " * 20
        hidden = [
            chunk(
                "h-secret", text=long_text, sensitivity_rank=2, filter_values={"status": "visible"}
            ),
            chunk(
                "h-scope", text=long_text, scope="project:x", filter_values={"status": "visible"}
            ),
            chunk("h-old", text="glacier", valid_to=200, filter_values={"status": "visible"}),
            chunk(
                "h-type",
                text="glacier",
                element_type="Evidence",
                filter_values={"status": "visible"},
            ),
            chunk("h-status", text="harbour copper", filter_values={"status": "hidden"}),
            chunk("h-none", text="glacier lantern"),
        ]
        await text.upsert_text_chunks(hidden)
        after = [await text.text_search(q, 10, search_filter) for q in queries]
        for query, old, new in zip(queries, before, after, strict=True):
            assert hit_view(new) == hit_view(old), query
            for a, b in zip(old, new, strict=True):
                assert b.score == pytest.approx(a.score, rel=1e-9), f"{query}: {a} -> {b}"

    async def test_text_reupsert_replaces_by_chunk_id(self, text: TextCapable) -> None:
        """Upserting an id again replaces it: one entry, the new validity and clearance."""
        chunks = corpus()
        await text.upsert_text_chunks(chunks)
        await text.upsert_text_chunks(chunks)
        assert await text.text_chunk_states() == {c.chunk_id: OPEN for c in chunks}
        target = chunks[0]  # "glacier harbour"
        retired = chunk(target.element_id, text=target.text, valid_to=500)
        await text.upsert_text_chunks([retired])
        assert (await text.text_chunk_states())[target.chunk_id] == 500

        async def ids(search_filter: SearchFilter) -> set[str]:
            return {h.chunk_id for h in await text.text_search("harbour", 10, search_filter)}

        assert target.chunk_id not in await ids(PUBLIC)
        assert target.chunk_id in await ids(SearchFilter(max_sensitivity_rank=0, as_of=499))
        assert target.chunk_id not in await ids(SearchFilter(max_sensitivity_rank=0, as_of=500))
        secret = chunk(target.element_id, text=target.text, sensitivity_rank=3)
        await text.upsert_text_chunks([secret])
        assert target.chunk_id not in await ids(PUBLIC)
        assert target.chunk_id in await ids(EVERYTHING)
        assert len(await text.text_chunk_states()) == len(chunks)

    async def test_text_chunk_states_delete_and_rebuild(self, text: TextCapable) -> None:
        """Listing, deleting by id, index drift and rebuild keep the index and chunks in step."""
        chunks = [*corpus(), chunk("t7", text="glacier", valid_to=300)]
        await text.upsert_text_chunks(chunks)
        assert await text.text_chunk_states() == {c.chunk_id: c.valid_to for c in chunks}
        assert await text.text_index_drift() == 0
        await text.delete_text_chunks([chunks[0].chunk_id, "missing@1#0"])
        await text.delete_text_chunks([])
        left = {c.chunk_id: c.valid_to for c in chunks[1:]}
        assert await text.text_chunk_states() == left
        hits = await text.text_search("glacier", 10, PUBLIC)
        assert {h.element_id for h in hits} == {"t2", "t6"}
        assert await text.text_index_drift() == 0
        await text.rebuild_text_index()
        assert hit_view(await text.text_search("glacier", 10, PUBLIC)) == hit_view(hits)
        assert await text.text_chunk_states() == left
        assert await text.text_index_drift() == 0

    async def test_text_hostile_ids_round_trip(self, text: TextCapable) -> None:
        """Quotes, SQL, unicode, `@`/`#` in ids and text are data."""
        chunks = [chunk(eid, text=f"glacier {eid}") for eid in HOSTILE_IDS]
        stored = {c.chunk_id: c for c in chunks}
        await text.upsert_text_chunks(chunks)
        assert await text.text_chunk_states() == dict.fromkeys(stored, OPEN)
        hits = await text.text_search("glacier", len(chunks) + 5, PUBLIC)
        check_text_hits(hits, stored, PUBLIC)
        assert {h.chunk_id for h in hits} == set(stored)
        await text.delete_text_chunks(list(stored)[:5])
        assert set(await text.text_chunk_states()) == set(list(stored)[5:])
        await text.delete_text_chunks(list(stored))
        assert await text.text_chunk_states() == {}
        assert await text.text_search("glacier", 5, PUBLIC) == []

    async def test_text_empty_store(self, text: TextCapable) -> None:
        """A fresh store lists nothing, finds nothing and has no drift."""
        assert await text.text_chunk_states() == {}
        assert await text.text_search("glacier", 5, EVERYTHING) == []
        assert await text.text_index_drift() == 0
