"""The filter grammar and the reference evaluator, without stores: patterns, trees, bounds.

`like` is held to an independent oracle (a regular expression built here); the pushdown a
store receives is held to the tree it came from (every match satisfies it); the parser's
bounds hold for hostile input without recursion errors.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.contract.filter_tree import (
    AllOf,
    AnyOf,
    FilterNode,
    Not,
    RelationPredicate,
    describe,
    evaluate,
    pushdown,
    to_json,
)
from connectors.contract.predicates import Op, Predicate, like
from uda.errors import UnknownFilterFieldError
from uda.query.filters import MAX_DEPTH, MAX_LEAVES, MAX_PATTERN, parse_filters


# -- patterns ----------------------------------------------------------------------------------
def _oracle(pattern: str, text: str, fold: bool) -> bool:
    regex, escaped = "", False
    for char in pattern:
        if escaped:
            regex += re.escape(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            regex += ".*"
        elif char == "_":
            regex += "."
        else:
            regex += re.escape(char)
    if escaped:
        regex += re.escape("\\")
    flags = re.DOTALL
    if fold:
        pattern, text = pattern.casefold(), text.casefold()
        return _oracle(pattern, text, fold=False)
    return re.fullmatch(regex, text, flags) is not None


_alphabet = st.sampled_from(["a", "b", "A", "%", "_", "\\", "\n", "é"])


@given(pattern=st.text(_alphabet, max_size=8), text=st.text(_alphabet, max_size=10))
def test_like_matches_its_oracle(pattern: str, text: str) -> None:
    assert like(pattern, text) == _oracle(pattern, text, fold=False)
    assert like(pattern, text, fold_case=True) == _oracle(pattern, text, fold=True)


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("%", "", True),
        ("_", "", False),
        ("a%b", "axxb", True),
        ("a%b", "axxbx", False),
        ("100\\%", "100%", True),
        ("100\\%", "1000", False),
        ("%%a", "ba", True),
        ("%a%a%a%a%a%a%a%a%b", "a" * 3000, False),  # no exponential backtracking here
    ],
)
def test_like_examples(pattern: str, text: str, expected: bool) -> None:
    assert like(pattern, text) is expected


# -- trees -------------------------------------------------------------------------------------
_values = st.dictionaries(
    st.sampled_from(["a", "b", "c"]), st.integers(0, 3) | st.sampled_from(["x", "y"]), max_size=3
)
_leaf = st.builds(
    lambda field, op, value: Predicate(field=field, op=op, value=value),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([Op.EQ, Op.NE, Op.GT, Op.LTE]),
    st.integers(0, 3),
) | st.builds(
    lambda field, low: Predicate(field=field, op=Op.BETWEEN, value=(low, low + 1)),
    st.sampled_from(["a", "b"]),
    st.integers(0, 2),
)
_trees: st.SearchStrategy[FilterNode] = st.recursive(
    _leaf,
    lambda children: (
        st.builds(lambda c: AllOf(children=tuple(c)), st.lists(children, max_size=3))
        | st.builds(lambda c: AnyOf(children=tuple(c)), st.lists(children, min_size=1, max_size=3))
        | st.builds(lambda c: Not(child=c), children)
    ),
    max_leaves=8,
)


@given(tree=_trees, values=_values)
def test_every_match_satisfies_what_is_pushed_down(tree: FilterNode, values: Any) -> None:
    if evaluate(tree, values):
        assert all(p.matches(values) for p in pushdown(tree)), describe(tree)


def test_pushdown_takes_root_conjuncts_only() -> None:
    low = Predicate(field="a", op=Op.GT, value=1)
    tree = AllOf(
        children=(
            low,
            Predicate(field="b", op=Op.NE, value=2),  # negative: not pushed
            Predicate(field="c", op=Op.BETWEEN, value=(1, 3)),
            AnyOf(children=(Predicate(field="d", op=Op.EQ, value=1),)),
            RelationPredicate(
                relation="partOf",
                direction="out",
                predicate=Predicate(field="e", op=Op.EQ, value=1),
            ),
        )
    )
    assert pushdown(tree) == (
        low,
        Predicate(field="c", op=Op.GTE, value=1),
        Predicate(field="c", op=Op.LTE, value=3),
    )


def test_relation_leaves_see_only_the_neighbours_they_are_given() -> None:
    leaf = RelationPredicate(
        relation="partOf", direction="out", predicate=Predicate(field="name", op=Op.EQ, value="p")
    )
    assert evaluate(leaf, {}, lambda r, d: [{"name": "p"}] if (r, d) == ("partOf", "out") else [])
    assert not evaluate(leaf, {}, lambda r, d: [{"name": "p"}] if d == "in" else [])
    assert not evaluate(leaf, {})  # no neighbours at all
    assert evaluate(Not(child=leaf), {})


# -- the grammar -------------------------------------------------------------------------------
def test_object_and_seed_forms_build_the_same_tree() -> None:
    objects = {
        "$or": [
            {"status": "accepted", "timestamp": {"$between": ["2025-01-01", "2025-12-31"]}},
            {"partOf.name": {"$ilike": "pay%"}},
        ]
    }
    seed = {
        "op": "OR",
        "children": [
            {
                "op": "AND",
                "children": [
                    {"path": "status", "condition": {"op": "eq", "value": "accepted"}},
                    {
                        "path": "timestamp",
                        "condition": {
                            "op": "between",
                            "value": {"start": "2025-01-01", "end": "2025-12-31"},
                        },
                    },
                ],
            },
            {"path": "partOf.name", "condition": {"op": "like", "value": "pay%"}},
        ],
    }
    assert parse_filters(objects) == parse_filters(seed)
    assert to_json(parse_filters(objects))["or"][1] == {
        "path": "partOf.name",
        "op": "$ilike",
        "value": "pay%",
    }


def test_flat_filters_keep_their_meaning() -> None:
    tree = parse_filters({"element_type": "Decision", "status": ["accepted", "proposed"]})
    assert tree == AllOf(
        children=(
            Predicate(field="element_type", op=Op.EQ, value="Decision"),
            Predicate(field="status", op=Op.IN, value=("accepted", "proposed")),
        )
    )
    assert parse_filters({}) == AllOf(children=())


def _nested(depth: int) -> dict[str, Any]:
    tree: dict[str, Any] = {"status": "accepted"}
    for _ in range(depth - 1):
        tree = {"$not": tree}
    return tree


def test_depth_and_leaf_bounds() -> None:
    assert parse_filters(_nested(MAX_DEPTH))
    with pytest.raises(UnknownFilterFieldError, match=f"at most {MAX_DEPTH}") as caught:
        parse_filters(_nested(MAX_DEPTH + 1))
    assert caught.value.field == "context_filters" + ".$not" * MAX_DEPTH
    many = {"$or": [{"name": f"n{i}"} for i in range(MAX_LEAVES)]}
    assert parse_filters(many)
    too_many = {"$or": [{"name": f"n{i}"} for i in range(MAX_LEAVES + 1)]}
    with pytest.raises(UnknownFilterFieldError, match=f"at most {MAX_LEAVES} comparisons"):
        parse_filters(too_many)
    with pytest.raises(UnknownFilterFieldError, match=f"at most {MAX_PATTERN} characters"):
        parse_filters({"name": {"$like": "%" * (MAX_PATTERN + 1)}})


def test_hostile_nesting_is_a_user_error_not_a_recursion_error() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(UnknownFilterFieldError):
        parse_filters({"name": deep})
    tree: Any = {"status": "accepted"}
    for _ in range(5000):
        tree = {"$or": [tree]}
    with pytest.raises(UnknownFilterFieldError, match="at most"):
        parse_filters(tree)


def test_seed_form_errors_name_the_node() -> None:
    with pytest.raises(UnknownFilterFieldError) as caught:
        parse_filters({"op": "XOR", "children": [{"status": "accepted"}]})
    assert caught.value.field == "context_filters.op"
    with pytest.raises(UnknownFilterFieldError) as caught:
        parse_filters({"op": "AND", "children": [{"path": "status", "condition": {"op": "regex"}}]})
    assert caught.value.field == "context_filters.children[0].condition.op"
