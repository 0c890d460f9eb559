"""Conformance of filter trees: a store returns exactly the elements the tree matches.

A store receives a tree as `SearchFilter.tree` and may compile it (SQL, a Chroma `where`) or
check it on the rows it reads (`SearchFilter.allows_chunk`); either way the elements it returns
for a large `k` must be exactly those whose values satisfy `evaluate(tree, values)`. Hand-made
trees for what stores most often get wrong, then random ones (hypothesis: up to three levels
of `$and`, `$or` and `$not` over leaves with every operator) on a few fields holding values of
mixed types, often missing, are checked against one store loaded once per test. Hostile field
names (quotes, SQL) must be data, too.

Needs `hypothesis` (skipped, saying so, without it).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from connectors.base import TextCapable, VectorCapable
from connectors.conformance.data import chunk, random_vectors
from connectors.conformance.fixtures import ConformanceBase, Harness, claim
from connectors.contract.filter_tree import AllOf, AnyOf, FilterNode, Not, describe, evaluate
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import ChunkHit, ChunkRecord, SearchFilter

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

MAX_EXAMPLES = 25
FIELDS = ("status", "year", "score", "flag", "title")
STRINGS: tuple[str, ...] = (
    "accepted",
    "Accepted",
    "draft",
    "",
    "Straße",
    "STRASSE",
    "ß",
    "a%b",
    "a_b",
    "x\\y",
    "é",
    "É",
    "\u212a",  # the Kelvin sign: folds to "k"
    "🚀",
)
NUMBERS: tuple[Scalar, ...] = (0, 1, 2, -1, 2019, 2021, 0.5, 1.0, 2.5, True, False)
PATTERN_CHARACTERS = "aAdkKsSß%_\\éÉ"
_ESCAPED = "%_\\"
HOSTILE_FIELDS: tuple[str, ...] = (
    "it's",
    'say "hi"',
    "x'); DROP TABLE chunks; --",
    '"); DROP TABLE vector_chunks; --',
    "$and",
    "a.b",
    "[0]",
    "naïve 東京",
    "back\\slash",
    "100% _match_*?[",
)


def tree_corpus(dimension: int, n: int = 48) -> list[ChunkRecord]:
    """Public, current chunks (one per element) whose fields are often missing or odd.

    Every field takes values of every kind (strings, integers, floats, booleans), so each
    comparison meets type mismatches. Each text is `common <n>`: a text search for "common"
    finds every chunk.
    """
    rng = random.Random(23)  # noqa: S311 - reproducible test data, not secrets
    pool: list[Scalar] = [*STRINGS, *NUMBERS]
    vectors = random_vectors(n, dimension, seed=29)
    records: list[ChunkRecord] = []
    for i in range(n):
        values = {name: rng.choice(pool) for name in FIELDS if rng.random() < 0.7}
        records.append(
            chunk(f"tree-{i}", text=f"common {i}", embedding=vectors[i], filter_values=values)
        )
    return records


def tree_strategy(fields: Sequence[str] = FIELDS) -> SearchStrategy[FilterNode]:
    """Trees of up to three levels of nodes over `fields` (and one never stored)."""
    from hypothesis import strategies as st

    field = st.sampled_from([*fields, "nowhere"])
    strings = st.sampled_from(STRINGS)
    numbers = st.sampled_from(NUMBERS)
    scalars = strings | numbers

    def leaf(op: Op, values: SearchStrategy[Scalar] | SearchStrategy[tuple[Scalar, ...]]) -> Any:
        def build(name: str, value: Scalar | tuple[Scalar, ...]) -> FilterNode:
            return Predicate(field=name, op=op, value=value)

        return st.builds(build, field, values)

    pattern = st.text(st.sampled_from(PATTERN_CHARACTERS), max_size=5) | st.builds(
        _pattern_from,
        strings,
        st.sampled_from(("same", "upper", "lower", "swapcase", "casefold")),
        st.sets(st.integers(0, 7), max_size=2),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    )
    pairs = st.tuples(strings, strings) | st.tuples(numbers, numbers)
    leaves = st.one_of(
        *(leaf(op, scalars) for op in (Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE)),
        *(leaf(op, st.lists(scalars, max_size=3).map(tuple)) for op in (Op.IN, Op.NIN)),
        leaf(Op.BETWEEN, pairs),
        leaf(Op.LIKE, pattern | strings),
        leaf(Op.ILIKE, pattern | strings),
        leaf(Op.EXISTS, st.booleans()),
    )

    def nodes(children: SearchStrategy[FilterNode]) -> SearchStrategy[FilterNode]:
        many = st.lists(children, max_size=3).map(tuple)
        return leaves | st.one_of(
            many.map(lambda c: AllOf(children=c)),
            many.map(lambda c: AnyOf(children=c)),
            children.map(lambda c: Not(child=c)),
        )

    return nodes(nodes(nodes(leaves)))


def _pattern_from(
    text: str, case: str, holes: set[int], escape: bool, head: bool, tail: bool
) -> str:
    """A pattern made from a stored string, so that patterns often match something.

    Its case changed, some characters replaced by `_`, `%` before or after, and the
    characters `like` reads as wildcards escaped (or left to act as wildcards).
    """
    changed = {
        "same": text,
        "upper": text.upper(),
        "lower": text.lower(),
        "swapcase": text.swapcase(),
        "casefold": text.casefold(),
    }[case]
    out = [
        "_" if n in holes else ("\\" + c if escape and c in _ESCAPED else c)
        for n, c in enumerate(changed)
    ]
    return ("%" if head else "") + "".join(out) + ("%" if tail else "")


def _anywhere(op: Op, value: Scalar | tuple[Scalar, ...]) -> FilterNode:
    """`op value` on any of the fields (each value is stored in some field of some chunk)."""
    return AnyOf(children=tuple(Predicate(field=f, op=op, value=value) for f in FIELDS))


def _everywhere(op: Op, value: Scalar | tuple[Scalar, ...]) -> FilterNode:
    return AllOf(children=tuple(Predicate(field=f, op=op, value=value) for f in FIELDS))


# Trees that exercise what stores most often get wrong, run before the random ones.
TRICKY_TREES: tuple[FilterNode, ...] = (
    _anywhere(Op.ILIKE, "strasse"),  # `ß` folds to two characters
    _anywhere(Op.ILIKE, "s_"),
    _anywhere(Op.ILIKE, "%K%"),  # the Kelvin sign folds to `k`
    _anywhere(Op.ILIKE, "é"),
    _anywhere(Op.LIKE, "a\\%b"),  # an escaped `%`
    _anywhere(Op.LIKE, "a%b"),
    _anywhere(Op.LIKE, "x\\\\y"),
    _anywhere(Op.LIKE, "_"),  # one character, not one byte
    _anywhere(Op.EQ, 1),  # 1, 1.0 and True
    _anywhere(Op.EQ, ""),
    _everywhere(Op.NE, True),
    _anywhere(Op.IN, (0, "accepted", 2.5)),
    _everywhere(Op.NIN, (False, "draft")),
    _anywhere(Op.GT, 0),  # never a boolean
    _anywhere(Op.LT, "b"),  # strings by code point
    _anywhere(Op.BETWEEN, ("A", "a")),
    _anywhere(Op.BETWEEN, (-1, 1.0)),
    Not(child=_everywhere(Op.EXISTS, True)),
    _anywhere(Op.EXISTS, False),
    Not(child=AnyOf(children=(_anywhere(Op.GTE, 2019), _anywhere(Op.ILIKE, "%a%")))),
)


async def for_random_trees(
    check: Callable[[FilterNode], Coroutine[Any, Any, None]],
    trees: SearchStrategy[FilterNode],
    examples: Sequence[FilterNode] = (),
) -> None:
    """Run `check` on `examples`, then on random trees; hypothesis shrinks a failure.

    Hypothesis drives the examples from a worker thread and each example runs on this event
    loop, so that one store, loaded once, serves every example.
    """
    try:
        from hypothesis import HealthCheck, example, given, settings
    except ImportError:  # pragma: no cover - the `dev` extra installs it
        pytest.skip("the filter-tree conformance tests need hypothesis")
    loop = asyncio.get_running_loop()

    def run(tree: FilterNode) -> None:
        asyncio.run_coroutine_threadsafe(check(tree), loop).result()

    for tree in examples:
        run = example(tree=tree)(run)
    test = settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )(given(tree=trees)(run))
    await asyncio.to_thread(test)


def _filter(tree: FilterNode) -> SearchFilter:
    return SearchFilter(max_sensitivity_rank=3, all_projects=True, tree=tree)


def _check_ids(
    hits: Sequence[ChunkHit],
    stored: dict[str, ChunkRecord],
    expected: set[str],
    tree: FilterNode,
    k: int,
) -> None:
    ids = [h.element_id for h in hits]
    assert len(ids) == len(set(ids)), f"an element returned twice: {ids}"
    got = set(ids)
    wrong = sorted(got - expected)
    missing = sorted(expected - got)
    assert got == expected, (
        f"tree {describe(tree)}, k={k}: returned {len(got)}, {len(expected)} match; "
        f"not matching: {[(e, dict(stored[e].filter_values)) for e in wrong[:5]]}; "
        f"missed: {[(e, dict(stored[e].filter_values)) for e in missing[:5]]}"
    )


class FilterTreeConformance(ConformanceBase):
    """Filter trees through `vector_search` and `text_search`, against `evaluate`."""

    async def test_vector_filter_trees_match_reference(self, harness: Harness) -> None:
        """Random trees: the elements found are exactly those the tree matches."""
        vector = claim(await harness.new(), VectorCapable)
        corpus = tree_corpus(harness.dimension)
        await vector.upsert_chunks(corpus)
        query = random_vectors(1, harness.dimension, seed=31)[0]
        await for_random_trees(
            lambda tree: self._vector_case(vector, corpus, query, tree),
            tree_strategy(),
            TRICKY_TREES,
        )

    async def test_text_filter_trees_match_reference(self, harness: Harness) -> None:
        """Random trees: the elements found are exactly those the tree matches."""
        text = claim(await harness.new(), TextCapable)
        corpus = tree_corpus(harness.dimension)
        await text.upsert_text_chunks(corpus)
        await for_random_trees(
            lambda tree: self._text_case(text, corpus, tree), tree_strategy(), TRICKY_TREES
        )

    async def test_vector_filter_tree_field_names_are_data(self, harness: Harness) -> None:
        """Field names full of quotes and SQL filter like any other; the store is unharmed."""
        vector = claim(await harness.new(), VectorCapable)
        corpus = _hostile_corpus(harness.dimension)
        await vector.upsert_chunks(corpus)
        query = random_vectors(1, harness.dimension, seed=37)[0]
        for tree in _hostile_trees():
            await self._vector_case(vector, corpus, query, tree)
        assert set(await vector.chunk_states()) == {c.chunk_id for c in corpus}

    async def test_text_filter_tree_field_names_are_data(self, harness: Harness) -> None:
        """Field names full of quotes and SQL filter like any other; the store is unharmed."""
        text = claim(await harness.new(), TextCapable)
        corpus = _hostile_corpus(harness.dimension)
        await text.upsert_text_chunks(corpus)
        for tree in _hostile_trees():
            await self._text_case(text, corpus, tree)
        assert set(await text.text_chunk_states()) == {c.chunk_id for c in corpus}

    @staticmethod
    async def _vector_case(
        vector: VectorCapable, corpus: list[ChunkRecord], query: list[float], tree: FilterNode
    ) -> None:
        stored = {c.element_id: c for c in corpus}
        expected = {c.element_id for c in corpus if evaluate(tree, c.filter_values)}
        # A large k must return every match; k = the number of matches makes stores that
        # over-fetch take their filtered path (a compiled `where`, a wider window).
        for k in (len(corpus) + 5, max(len(expected), 1)):
            hits = await vector.vector_search(query, k, _filter(tree))
            _check_ids(hits, stored, expected, tree, k)

    @staticmethod
    async def _text_case(text: TextCapable, corpus: list[ChunkRecord], tree: FilterNode) -> None:
        stored = {c.element_id: c for c in corpus}
        expected = {c.element_id for c in corpus if evaluate(tree, c.filter_values)}
        for k in (len(corpus) + 5, max(len(expected), 1)):
            hits = await text.text_search("common", k, _filter(tree))
            _check_ids(hits, stored, expected, tree, k)


def _hostile_corpus(dimension: int) -> list[ChunkRecord]:
    """Chunks whose field names are quotes, SQL and path syntax."""
    vectors = random_vectors(len(HOSTILE_FIELDS) * 2, dimension, seed=41)
    records: list[ChunkRecord] = []
    for i, name in enumerate(HOSTILE_FIELDS):
        for j, value in enumerate(("it's", 7)):
            n = 2 * i + j
            records.append(
                chunk(
                    f"hostile-{n}",
                    text=f"common {n}",
                    embedding=vectors[n],
                    filter_values={name: value, "plain": n},
                )
            )
    return records


def _hostile_trees() -> list[FilterNode]:
    trees: list[FilterNode] = []
    for name in HOSTILE_FIELDS:
        trees += [
            Predicate(field=name, op=Op.EQ, value="it's"),
            Predicate(field=name, op=Op.NE, value=7),
            Predicate(field=name, op=Op.ILIKE, value="IT'%"),
            Predicate(field=name, op=Op.IN, value=("x'); DROP TABLE chunks; --", 7)),
            Not(child=Predicate(field=name, op=Op.EXISTS, value=True)),
            AnyOf(
                children=(
                    Predicate(field=name, op=Op.GT, value=6),
                    Predicate(field="plain", op=Op.LT, value=2),
                )
            ),
        ]
    return trees


__all__ = [
    "FIELDS",
    "HOSTILE_FIELDS",
    "MAX_EXAMPLES",
    "TRICKY_TREES",
    "FilterTreeConformance",
    "for_random_trees",
    "tree_corpus",
    "tree_strategy",
]
