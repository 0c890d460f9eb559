"""Conformance of `VectorCapable`: cosine ranking, filters, k under selective filters, ids."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pytest
import pytest_asyncio

from connectors.base import VectorCapable
from connectors.conformance.data import (
    EDGE_FILTERS,
    FILTERS,
    HOSTILE_IDS,
    NO_TYPE_FILTERS,
    STRING_RANGE_FILTERS,
    axis,
    chunk,
    cosine,
    exact_top,
    filter_corpus,
    hit_view,
    near,
    random_vectors,
)
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.predicates import Op, Predicate
from connectors.contract.records import OPEN, ChunkHit, ChunkRecord, SearchFilter

EVERYTHING = SearchFilter(max_sensitivity_rank=3, all_projects=True)
PUBLIC = SearchFilter(max_sensitivity_rank=0)
RECALL = 0.9
SCORE_TOLERANCE = 1e-3  # embeddings may be stored as float32


def check_hits(
    hits: Sequence[ChunkHit],
    stored: Mapping[str, ChunkRecord],
    query: Sequence[float],
    search_filter: SearchFilter,
) -> None:
    """Every hit is a stored chunk the filter allows, scored by cosine, best first, once."""
    ids = [h.chunk_id for h in hits]
    assert len(ids) == len(set(ids)), f"a chunk returned twice: {ids}"
    for hit in hits:
        assert hit.chunk_id in stored, f"unknown chunk {hit.chunk_id!r}"
        record = stored[hit.chunk_id]
        assert (hit.element_id, hit.version) == (record.element_id, record.version)
        # A store may leave the text out (the planner reads it, ADR 53), never get it wrong.
        assert hit.text in (None, record.text), f"{hit.chunk_id!r}: not the chunk's text"
        assert search_filter.allows_chunk(record), f"{hit.chunk_id!r} does not pass {search_filter}"
        assert record.embedding is not None
        expected = cosine(query, record.embedding)
        assert hit.score == pytest.approx(expected, abs=SCORE_TOLERANCE), (
            f"{hit.chunk_id!r}: score {hit.score} is not the cosine similarity {expected}"
        )
    scores = [h.score for h in hits]
    assert all(a >= b - 1e-6 for a, b in itertools.pairwise(scores)), (
        f"hits not sorted by score: {scores}"
    )


class VectorConformance(ConformanceBase):
    """Tests for connectors that claim `VectorCapable` (skipped for the others)."""

    @pytest_asyncio.fixture
    async def vector(self, harness: Harness) -> VectorCapable:
        """A fresh connector as VectorCapable, or a skip naming the capability."""
        return claim(await harness.new(), VectorCapable)

    async def _vector_filter_cases(
        self,
        vector: VectorCapable,
        harness: Harness,
        cases: Sequence[tuple[str, SearchFilter]],
    ) -> None:
        """Run every filter at several k; report every failing case at once."""
        corpus = filter_corpus(harness.dimension)
        stored = {c.chunk_id: c for c in corpus}
        await vector.upsert_chunks(corpus)
        query = random_vectors(1, harness.dimension, seed=11)[0]
        tally = [0, 0]  # found, wanted: recall over every case

        async def case(search_filter: SearchFilter, k: int) -> None:
            allowed = [c for c in corpus if search_filter.allows_chunk(c)]
            hits = await vector.vector_search(query, k, search_filter)
            check_hits(hits, stored, query, search_filter)
            assert len(hits) == min(k, len(allowed)), (
                f"{len(hits)} hits, {len(allowed)} chunks pass"
            )
            expected = exact_top(query, corpus, k, search_filter)
            got = [h.chunk_id for h in hits]
            if k >= len(allowed):
                assert set(got) == set(expected), "not every passing chunk found"
            elif harness.exact_vectors:
                assert got == expected, "not the exact top-k"
            tally[0] += len(set(got) & set(expected))
            tally[1] += len(expected)

        failures: list[str] = []
        for label, search_filter in cases:
            # Small k: a store that over-fetches answers from its first page; larger k makes
            # it take its filtered path; k = everything must return every passing chunk.
            for k in (3, 10, len(corpus)):
                try:
                    await case(search_filter, k)
                except Exception as exc:  # collect them all: one report names every case
                    failures.append(f"filter {label!r}, k={k}: {type(exc).__name__}: {exc}")
        assert not failures, "\n".join(failures)
        assert tally[0] >= RECALL * tally[1], f"recall {tally[0] / max(tally[1], 1):.2f}"

    async def test_vector_ranking_matches_exact_cosine(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """Top-k is the exact cosine ranking (exact stores) or has recall >= 0.9 (ANN)."""
        vectors = random_vectors(80, harness.dimension, seed=1)
        corpus = [chunk(f"doc-{i}", text=f"text {i}", embedding=v) for i, v in enumerate(vectors)]
        stored = {c.chunk_id: c for c in corpus}
        await vector.upsert_chunks(corpus)
        found = 0
        queries = random_vectors(5, harness.dimension, seed=2)
        for query in queries:
            hits = await vector.vector_search(query, 10, EVERYTHING)
            check_hits(hits, stored, query, EVERYTHING)
            assert len(hits) == 10
            expected = exact_top(query, corpus, 10)
            if harness.exact_vectors:
                assert [h.chunk_id for h in hits] == expected
            found += len({h.chunk_id for h in hits} & set(expected))
        assert found >= RECALL * 10 * len(queries), f"recall {found / (10 * len(queries)):.2f}"

    async def test_vector_scores_are_cosine_similarities(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """Scores are cosine similarities in [-1, 1], whatever the vectors' norms."""
        d = harness.dimension
        shapes = {
            "same": axis(d, 0, 2.0),
            "diagonal": [a + b for a, b in zip(axis(d, 0), axis(d, 1), strict=True)],
            "orthogonal": axis(d, 1, 5.0),
            "obtuse": [a + b for a, b in zip(axis(d, 0, -0.5), axis(d, 2, 0.75**0.5), strict=True)],
            "opposite": axis(d, 0, -3.0),
        }
        corpus = [chunk(name, text=name, embedding=v) for name, v in shapes.items()]
        await vector.upsert_chunks(corpus)
        hits = await vector.vector_search(axis(d, 0, 0.25), 5, EVERYTHING)
        assert [h.element_id for h in hits] == list(shapes)
        for hit, expected in zip(hits, (1.0, 0.5**0.5, 0.0, -0.5, -1.0), strict=True):
            assert hit.score == pytest.approx(expected, abs=SCORE_TOLERANCE), hit
        top = await vector.vector_search(axis(d, 0), 2, EVERYTHING)
        assert [h.element_id for h in top] == ["same", "diagonal"]

    async def test_vector_k_hits_through_a_selective_filter(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """Exactly k hits when k chunks pass, even when 90% are hidden and nearer to the query."""
        d = harness.dimension
        query = random_vectors(1, d, seed=3)[0]
        visible = [
            chunk(f"visible-{i}", embedding=v, filter_values={"status": "accepted"})
            for i, v in enumerate(random_vectors(20, d, seed=4))
        ]
        hidden: list[ChunkRecord] = []
        for i in range(180):
            how = i % 3
            hidden.append(
                chunk(
                    f"hidden-{i}",
                    embedding=near(query, seed=100 + i, noise=0.3),
                    sensitivity_rank=3 if how == 0 else 0,
                    scope="project:secret" if how == 1 else None,
                    valid_to=150 if how == 2 else OPEN,
                    filter_values={"status": "draft"},
                )
            )
        corpus = visible + hidden
        stored = {c.chunk_id: c for c in corpus}
        await vector.upsert_chunks(corpus)
        accepted = SearchFilter(
            max_sensitivity_rank=3,
            all_projects=True,
            predicates=(Predicate(field="status", op=Op.EQ, value="accepted"),),
        )
        for search_filter in (PUBLIC, accepted):
            hits = await vector.vector_search(query, 10, search_filter)
            check_hits(hits, stored, query, search_filter)
            assert len(hits) == 10, f"{len(hits)} hits for k=10 under {search_filter}"
            expected = exact_top(query, corpus, 10, search_filter)
            got = [h.chunk_id for h in hits]
            if harness.exact_vectors:
                assert got == expected
            assert len(set(got) & set(expected)) >= RECALL * 10
            for k in (20, 50):
                hits = await vector.vector_search(query, k, search_filter)
                check_hits(hits, stored, query, search_filter)
                assert {h.chunk_id for h in hits} == {c.chunk_id for c in visible}, (
                    f"k={k}: {len(hits)} hits, 20 chunks pass"
                )

    async def test_vector_filter_semantics_match_reference(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """Clearance, scope, validity, as_of, types and predicates equal `allows_chunk`."""
        await self._vector_filter_cases(vector, harness, FILTERS)

    async def test_vector_filter_edge_cases(self, vector: VectorCapable, harness: Harness) -> None:
        """`projects` beside `all_projects`, `in` over numbers and booleans, empty ranges."""
        await self._vector_filter_cases(vector, harness, EDGE_FILTERS)

    async def test_vector_filter_without_element_types(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """`element_types=()` allows no chunk at all (None is the filter that allows all)."""
        await self._vector_filter_cases(vector, harness, NO_TYPE_FILTERS)

    async def test_vector_filter_string_ranges(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """`$gt`/`$gte`/`$lt`/`$lte` on strings compare them as strings."""
        await self._vector_filter_cases(vector, harness, STRING_RANGE_FILTERS)

    async def test_vector_upsert_is_idempotent(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """Upserting the same chunk ids again stores each chunk once."""
        vectors = random_vectors(10, harness.dimension, seed=5)
        corpus = [chunk(f"doc-{i}", embedding=v) for i, v in enumerate(vectors)]
        await vector.upsert_chunks(corpus)
        await vector.upsert_chunks(corpus)
        extra = chunk("doc-new", embedding=random_vectors(1, harness.dimension, seed=6)[0])
        await vector.upsert_chunks([*corpus[:5], extra])
        assert await vector.chunk_states() == {c.chunk_id: OPEN for c in [*corpus, extra]}
        hits = await vector.vector_search(vectors[0], 20, EVERYTHING)
        assert sorted(h.chunk_id for h in hits) == sorted(c.chunk_id for c in [*corpus, extra])

    async def test_vector_metadata_reupsert_changes_validity(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """Re-upserting a chunk with new validity or clearance changes what filters see."""
        query = random_vectors(1, harness.dimension, seed=8)[0]
        target = chunk("doc-a", text="a", embedding=near(query, seed=9, noise=0.1))
        other = chunk("doc-b", text="b", embedding=random_vectors(1, harness.dimension, seed=10)[0])
        await vector.upsert_chunks([target, other])

        async def ids(search_filter: SearchFilter) -> set[str]:
            return {h.chunk_id for h in await vector.vector_search(query, 5, search_filter)}

        assert target.chunk_id in await ids(PUBLIC)
        retired = chunk("doc-a", text="a", embedding=target.embedding, valid_to=500)
        await vector.upsert_chunks([retired])
        assert (await vector.chunk_states())[target.chunk_id] == 500
        assert await ids(PUBLIC) == {other.chunk_id}
        assert target.chunk_id in await ids(SearchFilter(max_sensitivity_rank=0, as_of=499))
        assert target.chunk_id not in await ids(SearchFilter(max_sensitivity_rank=0, as_of=500))
        secret = chunk("doc-a", text="a", embedding=target.embedding, sensitivity_rank=3)
        await vector.upsert_chunks([secret])
        assert (await vector.chunk_states())[target.chunk_id] == OPEN
        assert await ids(PUBLIC) == {other.chunk_id}
        hits = await vector.vector_search(query, 5, EVERYTHING)
        check_hits(hits, {c.chunk_id: c for c in (secret, other)}, query, EVERYTHING)
        assert len(await vector.chunk_states()) == 2

    async def test_vector_delete_chunks_of_elements(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """`delete_chunks` removes every chunk of the elements, every version; others stay."""
        vectors = random_vectors(5, harness.dimension, seed=12)
        corpus = [
            chunk("e1", version=1, index=0, embedding=vectors[0], valid_to=200),
            chunk("e1", version=1, index=1, embedding=vectors[1], valid_to=200),
            chunk("e1", version=2, index=0, embedding=vectors[2], valid_from=200),
            chunk("e2", embedding=vectors[3]),
            chunk("e10", embedding=vectors[4]),  # a prefix of nothing deleted
        ]
        await vector.upsert_chunks(corpus)
        await vector.delete_chunks([])
        await vector.delete_chunks(["e1", "missing"])
        assert set(await vector.chunk_states()) == {corpus[3].chunk_id, corpus[4].chunk_id}
        for query in vectors:
            hits = await vector.vector_search(query, 5, SearchFilter(max_sensitivity_rank=0))
            assert all(h.element_id != "e1" for h in hits)

    async def test_vector_delete_chunk_ids(self, vector: VectorCapable, harness: Harness) -> None:
        """`delete_chunk_ids` removes exactly those chunks; unknown ids are ignored."""
        vectors = random_vectors(3, harness.dimension, seed=13)
        corpus = [chunk("e1", index=i, embedding=v) for i, v in enumerate(vectors)]
        await vector.upsert_chunks(corpus)
        await vector.delete_chunk_ids([corpus[1].chunk_id, "missing@1#0"])
        await vector.delete_chunk_ids([])
        assert set(await vector.chunk_states()) == {corpus[0].chunk_id, corpus[2].chunk_id}
        hits = await vector.vector_search(vectors[1], 5, PUBLIC)
        assert corpus[1].chunk_id not in {h.chunk_id for h in hits}

    async def test_vector_chunk_states_lists_every_chunk(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """`chunk_states` lists every chunk with its `valid_to`, past any page size."""
        d = harness.dimension
        vectors = random_vectors(50, d, seed=14)
        corpus = [
            chunk(
                f"doc-{i}",
                # Cheap distinct vectors: one of 50, with one coordinate moved.
                embedding=[x + (1.0 if j == i % d else 0.0) for j, x in enumerate(vectors[i % 50])],
                valid_to=OPEN if i % 4 else 1_000 + i,
            )
            for i in range(2_100)
        ]
        await vector.upsert_chunks(corpus)
        assert await vector.chunk_states() == {c.chunk_id: c.valid_to for c in corpus}

    async def test_vector_hostile_ids_round_trip(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """Quotes, SQL, unicode, `@`/`#` and operators in ids, scopes and values are data."""
        vectors = random_vectors(len(HOSTILE_IDS), harness.dimension, seed=15)
        corpus = [
            chunk(
                eid,
                text=f"text of {eid}",
                embedding=v,
                scope="project:it's" if i % 2 else None,
                filter_values={"status": eid},
            )
            for i, (eid, v) in enumerate(zip(HOSTILE_IDS, vectors, strict=True))
        ]
        stored = {c.chunk_id: c for c in corpus}
        await vector.upsert_chunks(corpus)
        assert await vector.chunk_states() == dict.fromkeys(stored, OPEN)
        scoped = SearchFilter(max_sensitivity_rank=0, projects=("project:it's",))
        for c in corpus:
            assert c.embedding is not None
            hits = await vector.vector_search(c.embedding, len(corpus), scoped)
            check_hits(hits, stored, c.embedding, scoped)
            assert hits[0].chunk_id == c.chunk_id
            assert len(hits) == len(corpus)
            only = SearchFilter(
                max_sensitivity_rank=0,
                all_projects=True,
                predicates=(Predicate(field="status", op=Op.EQ, value=c.element_id),),
            )
            assert hit_view(await vector.vector_search(c.embedding, 3, only)) == hit_view(hits[:1])
            scored = await vector.vector_scores(c.embedding, list(HOSTILE_IDS), scoped)
            assert hit_view(scored) == hit_view(hits)
        half = list(HOSTILE_IDS[: len(HOSTILE_IDS) // 2])
        await vector.delete_chunks(half)
        rest = {cid: OPEN for cid, c in stored.items() if c.element_id not in half}
        assert await vector.chunk_states() == rest
        await vector.delete_chunk_ids(list(rest))
        assert await vector.chunk_states() == {}

    async def test_vector_empty_store(self, vector: VectorCapable, harness: Harness) -> None:
        """A fresh store lists nothing and finds nothing, without an error."""
        assert await vector.chunk_states() == {}
        assert await vector.vector_search(axis(harness.dimension, 0), 5, EVERYTHING) == []
        assert await vector.vector_scores(axis(harness.dimension, 0), ["a"], EVERYTHING) == []

    async def test_vector_scores_of_named_elements_under_every_filter(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """`vector_scores`: exactly the passing chunks of the named elements, cosine-scored."""
        corpus = filter_corpus(harness.dimension)
        stored = {c.chunk_id: c for c in corpus}
        await vector.upsert_chunks(corpus)
        query = random_vectors(1, harness.dimension, seed=12)[0]
        named = [c.element_id for c in corpus[::3]] + ["el-unknown"]
        failures: list[str] = []
        cases = [*FILTERS, *EDGE_FILTERS, *NO_TYPE_FILTERS, *STRING_RANGE_FILTERS]
        for label, search_filter in cases:
            expected = {
                c.chunk_id
                for c in corpus
                if c.element_id in named and search_filter.allows_chunk(c)
            }
            try:
                hits = await vector.vector_scores(query, named, search_filter)
                check_hits(hits, stored, query, search_filter)
                assert {h.chunk_id for h in hits} == expected, f"{len(hits)} hits"
            except Exception as exc:  # collect them all: one report names every case
                failures.append(f"filter {label!r}: {type(exc).__name__}: {exc}")
        assert not failures, "\n".join(failures)
        assert await vector.vector_scores(query, [], EVERYTHING) == []

    async def test_vector_scores_every_chunk_of_many_elements(
        self, vector: VectorCapable, harness: Harness
    ) -> None:
        """All chunks of each element, however many ids are asked for (batches are inside)."""
        vectors = random_vectors(12, harness.dimension, seed=13)
        corpus = [
            chunk(f"multi-{i // 3}", index=i % 3, text=f"part {i}", embedding=v)
            for i, v in enumerate(vectors)
        ]
        stored = {c.chunk_id: c for c in corpus}
        await vector.upsert_chunks(corpus)
        query = random_vectors(1, harness.dimension, seed=14)[0]
        named = [f"absent-{i}" for i in range(4500)] + ["multi-0", "multi-2", "multi-2"]
        hits = await vector.vector_scores(query, named, EVERYTHING)
        check_hits(hits, stored, query, EVERYTHING)
        assert sorted(h.chunk_id for h in hits) == sorted(
            c.chunk_id for c in corpus if c.element_id in {"multi-0", "multi-2"}
        )
