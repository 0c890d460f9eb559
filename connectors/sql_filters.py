"""Compile a pushdown `SearchFilter`, and filter trees, to parameterised SQL (SQLite dialect).

Only fixed SQL fragments are produced; every value, field path, pattern and id list is a
parameter.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any

from connectors.contract.filter_tree import AllOf, AnyOf, FilterNode, Not, RelationPredicate
from connectors.contract.patterns import LikeToken, folded_tokens, like_tokens, multi_folds
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import OPEN, SearchFilter

_SQL_OPS = {Op.EQ: "=", Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def compile_filter(search_filter: SearchFilter, *, table: str) -> tuple[str, list[Any]]:
    """A WHERE condition over `table`'s chunk columns and its parameters, in order.

    `table` is a fixed alias chosen by the caller, never user input.
    """
    t = table
    clauses = [f"{t}.sensitivity_rank <= ?"]
    params: list[Any] = [search_filter.max_sensitivity_rank]
    if not search_filter.all_projects:
        clauses.append(f"({t}.scope IS NULL OR {t}.scope IN (SELECT value FROM json_each(?)))")  # noqa: S608
        params.append(json.dumps(list(search_filter.projects)))
    if search_filter.as_of is None:
        clauses.append(f"{t}.valid_to = {OPEN}")
    else:
        clauses.append(f"{t}.valid_from <= ? AND {t}.valid_to > ?")
        params += [search_filter.as_of, search_filter.as_of]
    if search_filter.element_types is not None:
        clauses.append(f"{t}.element_type IN (SELECT value FROM json_each(?))")  # noqa: S608
        params.append(json.dumps(list(search_filter.element_types)))
    for predicate in search_filter.predicates:
        path = "$." + json.dumps(predicate.field)
        value_sql = f"json_extract({t}.filter_values, ?)"
        if predicate.op is Op.IN:
            clauses.append(f"{value_sql} IN (SELECT value FROM json_each(?))")  # noqa: S608
            params += [path, json.dumps(list(predicate.value))]  # type: ignore[arg-type]
        elif predicate.op in _SQL_OPS:
            clauses.append(f"{value_sql} {_SQL_OPS[predicate.op]} ?")
            params += [path, predicate.value]
        # Negative operators are not pushed down (see uda.query.filters.PUSHDOWN_OPS).
    if search_filter.tree is not None:
        condition, tree_params = tree_sql(search_filter.tree, f"{t}.filter_values")
        clauses.append(condition)
        params += tree_params
    return " AND ".join(clauses), params


# -- filter trees ----------------------------------------------------------------------------
# A tree compiles to a condition that is exactly `evaluate` wherever SQLite can decide it, and
# a sound relaxation elsewhere: each leaf is compiled for the polarity it sits in (an even or
# odd number of `Not` above it), and a leaf that cannot be decided exactly on a row is "true"
# in positive and "false" in negative position, so the condition is looser than the tree,
# never stricter. Every leaf is 0 or 1, never NULL, so that `NOT` is exact.
#
# Values are read with `json_type` (which tells `true` from `1`, and a JSON null from a missing
# field) and `json_extract`. Where SQLite cannot match Python exactly, the leaf is relaxed:
# - on a row whose JSON holds the escape of NUL anywhere, for comparisons that read strings
#   (`json_extract` cuts a string at NUL);
# - for a field name holding both NUL and `"` (see `_field`);
# - for an integer operand beyond 64 bits that no double equals (one that a double equals
#   travels as that double).
# Everything else is exact: booleans equal to 1 and 0 but never ordered, integers against
# floats, strings by code point (BINARY on UTF-8), `$like` escapes, and the Unicode case
# folding of `$ilike` (see connectors/contract/patterns.py).

_EQUAL_KINDS = "IN ('integer','real','true','false')"  # numbers under ==, as in Python
_ORDERED_KINDS = "IN ('integer','real')"  # numbers under <, > (stored booleans are not)
_INT64 = (-(2**63), 2**63 - 1)
_COMPARE = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


@dataclass(frozen=True)
class _Sql:
    """A SQL fragment and its positional parameters, in order of appearance."""

    text: str
    params: tuple[Any, ...] = ()


_TRUE, _FALSE = _Sql("1"), _Sql("0")


def _join(*parts: str | _Sql) -> _Sql:
    """Fixed SQL text and fragments, concatenated with their parameters in order."""
    text: list[str] = []
    params: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
        else:
            text.append(part.text)
            params += part.params
    return _Sql("".join(text), tuple(params))


def _text(value: str) -> _Sql:
    """A string parameter.

    One UTF-8 cannot encode (a lone surrogate) travels as JSON and is decoded by SQLite, the
    way the stored values written by `json.dumps` are.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _Sql("json_extract(?, '$')", (json.dumps(value),))
    return _Sql("?", (value,))


def _number(value: int | float | bool) -> _Sql | None:
    """A numeric parameter (a boolean as 0 or 1, as Python compares it).

    An integer beyond 64 bits travels as the double equal to it; None when there is none.
    """
    number = int(value) if isinstance(value, bool) else value
    if isinstance(number, int) and not _INT64[0] <= number <= _INT64[1]:
        return _Sql("?", (float(number),)) if _double_of(number) else None
    return _Sql("?", (number,))


def _double_of(number: int) -> bool:
    """Whether a double equals the integer exactly."""
    try:
        return float(number) == number
    except OverflowError:
        return False


def tree_sql(node: FilterNode, column: str) -> tuple[str, list[Any]]:
    """A condition on the JSON object in `column` with `evaluate`'s semantics, and its params.

    `column` is a fixed SQL expression chosen by the caller (`"t.filter_values"`), never user
    input; every field name, value and pattern is a parameter. The condition is exact where
    SQLite can decide the tree (see above) and a sound relaxation elsewhere. A relation leaf
    reads neighbours, which the row does not hold: it is relaxed too (compile
    `own_values_bound` of a tree to leave them out).
    """
    compiled = _tree(node, column, positive=True)
    return compiled.text, list(compiled.params)


def _tree(node: FilterNode, column: str, *, positive: bool) -> _Sql:
    match node:
        case Predicate():
            return _leaf(node, column, positive=positive)
        case RelationPredicate():
            return _TRUE if positive else _FALSE
        case AllOf() | AnyOf():
            if not node.children:
                return _TRUE if isinstance(node, AllOf) else _FALSE
            glue = " AND " if isinstance(node, AllOf) else " OR "
            parts: list[str | _Sql] = []
            for child in node.children:
                parts += [glue, _tree(child, column, positive=positive)]
            return _join("(", *parts[1:], ")")
        case Not():
            return _join("(NOT ", _tree(node.child, column, positive=not positive), ")")


def _leaf(predicate: Predicate, column: str, *, positive: bool) -> _Sql:
    """One predicate: exact, or true in positive and false in negative place."""
    unknown = _TRUE if positive else _FALSE
    op, value = predicate.op, predicate.value
    if op in (Op.NE, Op.NIN):  # exactly the negations of $eq and $in
        inner = Predicate(field=predicate.field, op=Op.EQ if op is Op.NE else Op.IN, value=value)
        return _join("(NOT ", _leaf(inner, column, positive=not positive), ")")
    field = _field(predicate.field, column)
    if field is None:
        return unknown
    kind, extracted = field
    if op is Op.EXISTS:  # Python's `present == value`
        if value == True:  # noqa: E712 - equality, as Predicate.matches compares
            return _join("(", kind, " IS NOT NULL)")
        return _join("(", kind, " IS NULL)") if value == False else _FALSE  # noqa: E712
    compiled = _condition(op, value, kind, extracted)
    if compiled is None:
        return unknown
    condition, reads_text = compiled
    if not reads_text:
        return condition
    return _join(
        f"(CASE WHEN instr({column}, '\\u0000') > 0 THEN {unknown.text} ELSE ", condition, " END)"
    )


def _field(name: str, column: str) -> tuple[_Sql, _Sql] | None:
    """(JSON type, value) of a field, the type NULL when missing; None if it cannot be read.

    A quoted path label finds a key as the JSON spells it (SQLite compares the two as written,
    escapes and all), and cannot hold `"`; `json_each` compares decoded keys but cuts them at
    NUL. So: a name JSON writes as it is (printable ASCII, no quote or backslash) by its path;
    another without NUL with `json_each`; one with NUL by its path as `json.dumps` spells it
    (how UDA's stores write `filter_values`), unless it also holds `"`.
    """
    spelled = json.dumps(name)
    if spelled == f'"{name}"' or ("\x00" in name and '"' not in name):
        path = _Sql("?", ("$." + spelled,))
        return (
            _join(f"json_type({column}, ", path, ")"),
            _join(f"json_extract({column}, ", path, ")"),
        )
    if "\x00" in name:
        return None
    key = _text(name)
    each = f"FROM json_each({column}) WHERE key = "
    return _join(f"(SELECT type {each}", key, ")"), _join(f"(SELECT value {each}", key, ")")


def _condition(
    op: Op, value: Scalar | tuple[Scalar, ...], kind: _Sql, extracted: _Sql
) -> tuple[_Sql, bool] | None:
    """(the exact 0/1 condition, whether it reads a string), or None if it cannot be exact."""
    if op is Op.EQ or op is Op.IN:
        if isinstance(value, tuple) != (op is Op.IN):
            return None  # `$in` over a string is a substring test; `$eq` to a tuple: not made
        return _one_of(kind, extracted, value if isinstance(value, tuple) else (value,))
    if op in _COMPARE:
        if isinstance(value, tuple):
            return None
        return _ordered(kind, extracted, ((_COMPARE[op], value),))
    if op is Op.BETWEEN:
        if not (isinstance(value, tuple) and len(value) == 2):
            return None
        return _ordered(kind, extracted, ((">=", value[0]), ("<=", value[1])))
    if op is Op.LIKE or op is Op.ILIKE:
        if not isinstance(value, str):
            return _FALSE, False  # a pattern that is not a string matches nothing
        return _pattern(kind, extracted, value, fold=op is Op.ILIKE), True
    return None


def _one_of(kind: _Sql, extracted: _Sql, values: tuple[Scalar, ...]) -> tuple[_Sql, bool] | None:
    """The field equals one of `values`: strings to strings, numbers (and booleans) to numbers.

    A string holding NUL or a NaN equals no stored value (rows holding NUL are relaxed), so
    they are left out; the others travel as one JSON array, infinities as parameters.
    """
    strings = [v for v in values if isinstance(v, str) and "\x00" not in v]
    numbers: list[int | float] = []
    for value in values:
        if isinstance(value, str):
            continue
        number = int(value) if isinstance(value, bool) else value
        if isinstance(number, int) and not _INT64[0] <= number <= _INT64[1]:
            if not _double_of(number):
                return None
            number = float(number)
        numbers.append(number)
    finite = [n for n in numbers if math.isfinite(n)]
    infinite = sorted({n for n in numbers if math.isinf(n)})
    parts: list[_Sql] = []
    if strings:
        parts.append(_members(kind, extracted, "= 'text'", [_in_json(strings)]))
    if finite or infinite:
        sets = [_in_json(finite)] if finite else []
        sets += [_Sql("(?)", (n,)) for n in infinite]
        parts.append(_members(kind, extracted, _EQUAL_KINDS, sets))
    # Rows holding NUL are relaxed whenever strings are compared, even a dropped one.
    reads_text = any(isinstance(v, str) for v in values)
    if not parts:
        return _FALSE, reads_text
    body = parts[0] if len(parts) == 1 else _join("(", parts[0], " OR ", parts[1], ")")
    return body, reads_text


def _in_json(values: list[Any]) -> _Sql:
    return _Sql("(SELECT value FROM json_each(?))", (json.dumps(values),))


def _members(kind: _Sql, extracted: _Sql, kinds: str, sets: list[_Sql]) -> _Sql:
    """The field is of `kinds` and its value is in one of the sets."""
    parts: list[str | _Sql] = []
    for member in sets:
        parts += [" OR ", extracted, " IN ", member]
    return _join("COALESCE(", kind, f" {kinds} AND (", *parts[1:], "), 0)")


def _ordered(
    kind: _Sql, extracted: _Sql, bounds: tuple[tuple[str, Scalar], ...]
) -> tuple[_Sql, bool] | None:
    """`extracted op bound` for every bound, with Python's rule on what compares.

    Strings compare with strings (by code point), numbers with numbers (a boolean bound as 0
    or 1; a stored boolean never compares); anything else is false. The first bound decides
    what compares, as in `Predicate.matches`; a later bound of the other kind would make the
    reference raise and is compiled as false.
    """
    textual = isinstance(bounds[0][1], str)
    parts: list[str | _Sql] = ["COALESCE(", kind, " = 'text'" if textual else f" {_ORDERED_KINDS}"]
    for operator, bound in bounds:
        if isinstance(bound, str) != textual:
            return _FALSE, False
        if isinstance(bound, str) and "\x00" in bound:
            # Against strings without NUL (rows holding one are relaxed), `x < p + NUL + ...`
            # is `x <= p` and `x > p + NUL + ...` is `x > p`: nothing lies between.
            bound = bound[: bound.index("\x00")]
            operator = "<=" if operator in ("<", "<=") else ">"
        param = _text(bound) if isinstance(bound, str) else _number(bound)
        if param is None:
            return None
        parts += [" AND ", extracted, f" {operator} ", param]
    return _join(*parts, ", 0)"), textual


def _pattern(kind: _Sql, extracted: _Sql, pattern: str, *, fold: bool) -> _Sql:
    """`$like` / `$ilike` as GLOB over the stored string, reading the pattern as `like` does.

    `%` is `*`, `_` is `?`, a literal is itself (bracketed where GLOB would read it). For
    `$ilike` each literal of the folded pattern is the class of characters that fold to it,
    matched against the string with its multi-character folds (`ß` -> `ss`) expanded: the
    string then folds character by character, exactly as `casefold` folds it.
    """
    tokens = folded_tokens(pattern) if fold else like_tokens(pattern)
    if any("\x00" in token.chars for token in tokens):
        return _FALSE  # a NUL the string must hold: no string read here holds one
    glob = _text(_glob(tokens))
    is_text = _join("COALESCE(", kind, " = 'text' AND ")
    if not fold:
        return _join(is_text, extracted, " GLOB ", glob, ", 0)")
    # Three cases, cheapest first: no character in the span of the multi-character folds
    # (most text), one of the rare ones (the recursive expansion), or only common ones.
    span, rare, common = _multi_classes()
    return _join(
        is_text, "CASE WHEN NOT ", extracted, " GLOB ", _text(span), " THEN ", extracted,
        " GLOB ", glob, " WHEN ", extracted, " GLOB ", _text(rare), " THEN ",
        _expanded(extracted), " GLOB ", glob, " ELSE ", _replace_all(extracted, common),
        " GLOB ", glob, " END, 0)",
    )  # fmt: skip


# Multi-character folds common in text (German, Turkish, typographic ligatures): replaced
# inline; the others by a recursive query.
_COMMON_MULTI = "\u00df\u0130\u1e9e\ufb00\ufb01\ufb02"
_REPLACES_PER_STEP = 6  # SQLite's parser stack (100 deep in 3.40) limits nested calls


@functools.cache
def _multi_classes() -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """GLOB patterns finding multi-character folds, and the common folds.

    (a character in the span of them all, a rare one, the common ones with their folds)
    """
    multi = multi_folds()
    low, high = min(multi), max(multi)
    rare = sorted(ord(c) for c in multi if c not in _COMMON_MULTI)
    ranges: list[list[int]] = []
    for code in rare:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    body = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)
    common = tuple((c, multi[c]) for c in _COMMON_MULTI if c in multi)
    return f"*[{low}-{high}]*", f"*[{body}]*", common


def _replace_all(text: _Sql, pairs: tuple[tuple[str, str], ...]) -> _Sql:
    """`text` with each character replaced by its fold (fixed SQL: code points only)."""
    expression = text.text
    for char, folded in pairs:
        codes = ", ".join(str(ord(c)) for c in folded)
        expression = f"replace({expression}, char({ord(char)}), char({codes}))"
    return _Sql(expression, text.params)


def _expanded(text: _Sql) -> _Sql:
    """`text` with every multi-character fold expanded (`ß` -> `ss`).

    One `replace` per character of `multi_folds()` (about a hundred), nested a few at a time in
    the steps of a recursive query, since SQLite's parser cannot nest them all. The SQL is
    fixed: code points of the Unicode tables, never user input.
    """
    return _join("(WITH RECURSIVE x(i, s) AS (SELECT 0, ", text, _expansion_steps())


@functools.cache
def _expansion_steps() -> str:
    items = list(multi_folds().items())
    steps = [items[n : n + _REPLACES_PER_STEP] for n in range(0, len(items), _REPLACES_PER_STEP)]
    branches = [
        f"WHEN {n} THEN {_replace_all(_Sql('s'), tuple(step)).text}" for n, step in enumerate(steps)
    ]
    return (  # fixed text: code points and counts
        f" UNION ALL SELECT i + 1, CASE i {' '.join(branches)} END FROM x WHERE i < {len(steps)})"  # noqa: S608
        f" SELECT s FROM x WHERE i = {len(steps)})"
    )


def _glob(tokens: list[LikeToken]) -> str:
    """A GLOB pattern matching exactly what the tokens match."""
    out: list[str] = []
    for token in tokens:
        if token.kind == "run":
            out.append("*")
        elif token.kind == "one":
            out.append("?")
        elif len(token.chars) == 1:
            char = token.chars[0]
            out.append(f"[{char}]" if char in "*?[" else char)
        else:
            out.append(_glob_class(token.chars))
    return "".join(out)


def _glob_class(chars: tuple[str, ...]) -> str:
    """`[...]` matching exactly `chars`: `]` first, `^` never first, `-` last (all literal)."""
    rest = sorted(set(chars) - {"]", "^", "-"})
    body = ("]" if "]" in chars else "") + "".join(rest)
    if "^" in chars:
        body = body + "^" if body else ("-^" if "-" in chars else "^")
    if "-" in chars and not body.startswith("-"):
        body += "-"
    return f"[{body}]"
