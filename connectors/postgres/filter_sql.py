"""The pushdown filter on PostgreSQL: a `SearchFilter` or a filter tree as a WHERE condition.

`compile_filter` turns a caller's filter into a condition on a chunk table's columns (the
vector and lexical legs, structured retrieval), `tree_sql` a filter tree into one on a JSONB
column (also aggregates). `storable` tells which strings PostgreSQL's `text` can hold; every
statement builder of this package uses it to drop values no stored row can have. A module of
its own because it is the one place where caller input shapes SQL: only fixed fragments are
formatted in (table aliases and columns chosen by the callers, `OPEN`); every field name,
value and pattern is a named parameter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from connectors.contract.characters import forbidden_character
from connectors.contract.filter_tree import AllOf, AnyOf, FilterNode, Not, RelationPredicate
from connectors.contract.patterns import LikeToken, folded_tokens, like_tokens, multi_folds
from connectors.contract.predicates import Op, Predicate, Scalar
from connectors.contract.records import OPEN, SearchFilter

# -- the pushdown filter ---------------------------------------------------------------
_ORDERED = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}


def compile_filter(search_filter: SearchFilter, *, table: str) -> tuple[str, dict[str, Any]]:
    """A WHERE condition over `table`'s chunk columns, and its named parameters.

    Mirrors `SearchFilter.allows_chunk` on the `filter_values` JSONB. `table` is a fixed alias
    chosen by the caller, never user input; parameter names are generated here (`f_*`).
    Text that PostgreSQL cannot hold (a NUL character, a lone surrogate) can match no stored
    row: such project and type names are dropped from their lists, and a predicate with one is
    not pushed down (phase 3 checks it anyway; a pushdown may be looser, never stricter).
    """
    t = table
    params: dict[str, Any] = {"f_rank": search_filter.max_sensitivity_rank}
    clauses = [f"{t}.sensitivity_rank <= %(f_rank)s"]
    if not search_filter.all_projects:
        clauses.append(f"({t}.scope IS NULL OR {t}.scope = ANY(%(f_projects)s::text[]))")
        params["f_projects"] = [p for p in search_filter.projects if storable(p)]
    if search_filter.as_of is None:
        clauses.append(f"{t}.valid_to = {OPEN}")
    else:
        clauses.append(f"{t}.valid_from <= %(f_as_of)s AND {t}.valid_to > %(f_as_of)s")
        params["f_as_of"] = search_filter.as_of
    if search_filter.element_types is not None:
        clauses.append(f"{t}.element_type = ANY(%(f_types)s::text[])")
        params["f_types"] = [e for e in search_filter.element_types if storable(e)]
    for n, predicate in enumerate(search_filter.predicates):
        clause = _predicate_sql(predicate, f"{t}.filter_values", f"f_p{n}", params)
        if clause:
            clauses.append(clause)
    if search_filter.tree is not None:
        clauses.append(tree_sql(search_filter.tree, f"{t}.filter_values", params, "f_t"))
    return " AND ".join(clauses), params


def _predicate_sql(predicate: Predicate, column: str, name: str, params: dict[str, Any]) -> str:
    """One predicate as SQL with Python's comparison semantics (`Predicate.matches`).

    Numbers and booleans compare as numbers (`True == 1` in Python), strings as strings by
    code point (`COLLATE "C"` on UTF-8); a value of the other kind never matches.
    """
    values = predicate.value if isinstance(predicate.value, tuple) else (predicate.value,)
    if not storable(predicate.field) or not all(storable(v) for v in values if isinstance(v, str)):
        return ""
    params[f"{name}_field"] = predicate.field
    value = f"{column} -> %({name}_field)s"
    as_number = (
        f"(CASE jsonb_typeof({value}) WHEN 'number' THEN ({value})::numeric "
        f"WHEN 'boolean' THEN ({value})::boolean::int::numeric END)"
    )
    as_text = f"(CASE jsonb_typeof({value}) WHEN 'string' THEN {value} #>> '{{}}' END)"
    if predicate.op in (Op.EQ, Op.IN):
        strings = [v for v in values if isinstance(v, str)]
        numbers = [_decimal(v) for v in values if not isinstance(v, str)]
        parts: list[str] = []
        if strings:
            params[f"{name}_s"] = strings
            parts.append(f'{as_text} COLLATE "C" = ANY(%({name}_s)s::text[])')
        if numbers:
            params[f"{name}_n"] = numbers
            parts.append(f"{as_number} = ANY(%({name}_n)s::numeric[])")
        return "(" + " OR ".join(parts) + ")" if parts else ""
    if predicate.op in _ORDERED:
        bound = values[0]
        operator = _ORDERED[predicate.op]
        if isinstance(bound, str):
            params[f"{name}_v"] = bound
            return f'{as_text} COLLATE "C" {operator} %({name}_v)s::text'
        params[f"{name}_v"] = _decimal(bound)
        # Python's ordered comparison rejects booleans on the stored side.
        return (
            f"(jsonb_typeof({value}) = 'number' AND ({value})::numeric {operator} "
            f"%({name}_v)s::numeric)"
        )
    return ""  # negative operators are not pushed down (uda.query.filters.PUSHDOWN_OPS)


# -- filter trees ----------------------------------------------------------------------------
# As in connectors/sql_filters.py for SQLite: each leaf is compiled for the polarity it sits in,
# exact where PostgreSQL can decide it, else "true" in positive and "false" in negative
# position (a sound relaxation); every leaf is true or false, never NULL, so `NOT` is exact.
# Values are read from the JSONB by `jsonb_typeof` (which tells `true` from `1` and a JSON
# null from a missing field). Strings compare by code point (`COLLATE "C"` on UTF-8). Text
# PostgreSQL cannot hold (`storable`) is in no stored row (writes refuse it), so a field with
# such a name is missing everywhere, such a string equals nothing, a pattern needing such a
# character matches nothing, and a bound holding one compares as an equivalent bound without
# it: all exact. One thing is relaxed: numbers of magnitude 2**53 and more, compared with a
# bound that large. JSONB keeps a float as its shortest decimal (`1.152921504606847e+18` for
# 2.0**60), which is not its exact value and is indistinguishable from an integer, so such
# rows are relaxed for such bounds.

_EXACT_BELOW = 2**53  # every float of smaller magnitude compares with integers exactly


class _Names:
    """Named parameters `%(<prefix><n>)s` added to the caller's dict."""

    def __init__(self, params: dict[str, Any], prefix: str) -> None:
        self.params = params
        self.prefix = prefix
        self.count = 0

    def add(self, value: Any, cast: str = "") -> str:
        while f"{self.prefix}{self.count}" in self.params:
            self.count += 1
        name = f"{self.prefix}{self.count}"
        self.params[name] = value
        return f"%({name})s{cast}"


def tree_sql(node: FilterNode, column: str, params: dict[str, Any], prefix: str) -> str:
    """A condition on the JSONB object in `column` with `evaluate`'s semantics.

    Adds its named parameters (`<prefix>0`, `<prefix>1`, ...) to `params`. `column` is a fixed
    SQL expression chosen by the caller (`"t.filter_values"`), never user input; every field
    name, value and pattern is a parameter. Exact where PostgreSQL can decide the tree (see
    above), a sound relaxation elsewhere; a relation leaf reads neighbours, which the row does
    not hold, and is relaxed too (compile `own_values_bound` of a tree to leave them out).
    """
    return _tree(node, column, _Names(params, prefix), positive=True)


def _tree(node: FilterNode, column: str, names: _Names, *, positive: bool) -> str:
    match node:
        case Predicate():
            return _leaf(node, column, names, positive=positive)
        case RelationPredicate():
            return "true" if positive else "false"
        case AllOf() | AnyOf():
            if not node.children:
                return "true" if isinstance(node, AllOf) else "false"
            glue = " AND " if isinstance(node, AllOf) else " OR "
            inner = [_tree(c, column, names, positive=positive) for c in node.children]
            return "(" + glue.join(inner) + ")"
        case Not():
            return f"(NOT {_tree(node.child, column, names, positive=not positive)})"


def _leaf(predicate: Predicate, column: str, names: _Names, *, positive: bool) -> str:
    """One predicate: exact, or true in positive and false in negative place."""
    unknown = "true" if positive else "false"
    op, value = predicate.op, predicate.value
    if op in (Op.NE, Op.NIN):  # exactly the negations of $eq and $in
        inner = Predicate(field=predicate.field, op=Op.EQ if op is Op.NE else Op.IN, value=value)
        return f"(NOT {_leaf(inner, column, names, positive=not positive)})"
    if not storable(predicate.field):  # no stored row has such a field
        return "true" if predicate.matches({}) else "false"
    value_sql = f"({column} -> {names.add(predicate.field)})"
    kind = f"jsonb_typeof({value_sql})"
    as_text = f"(CASE {kind} WHEN 'string' THEN {value_sql} #>> '{{}}' END) COLLATE \"C\""
    if op is Op.EXISTS:  # Python's `present == value`
        if value == True:  # noqa: E712 - equality, as Predicate.matches compares
            return f"({value_sql} IS NOT NULL)"
        return f"({value_sql} IS NULL)" if value == False else "false"  # noqa: E712
    if op is Op.EQ or op is Op.IN:
        if isinstance(value, tuple) != (op is Op.IN):
            return unknown  # `$in` over a string is a substring test; `$eq` to a tuple
        values = value if isinstance(value, tuple) else (value,)
        return _pg_one_of(values, value_sql, kind, as_text, names, unknown)
    if op in _ORDERED or op is Op.BETWEEN:
        if op is Op.BETWEEN:
            if not (isinstance(value, tuple) and len(value) == 2):
                return unknown
            bounds = ((">=", value[0]), ("<=", value[1]))
        elif isinstance(value, tuple):
            return unknown
        else:
            bounds = ((_ORDERED[op], value),)
        return _pg_ordered(bounds, value_sql, kind, as_text, names, unknown)
    if op is Op.LIKE or op is Op.ILIKE:
        if not isinstance(value, str):
            return "false"  # a pattern that is not a string matches nothing
        return _pg_pattern(value, as_text, names, fold=op is Op.ILIKE)
    return unknown


def _as_number(value_sql: str, kind: str, *, booleans: bool) -> str:
    boolean = f" WHEN 'boolean' THEN ({value_sql})::boolean::int::numeric" if booleans else ""
    return f"(CASE {kind} WHEN 'number' THEN ({value_sql})::numeric{boolean} END)"


def _big_guard(
    number: str, condition: str, unknown: str, bounds: Sequence[int | float | bool]
) -> str:
    """`condition`, relaxed on rows whose number is too large to compare exactly (see above)."""
    if all(abs(b) < _EXACT_BELOW or (isinstance(b, float) and math.isinf(b)) for b in bounds):
        return condition
    return f"(CASE WHEN abs({number}) >= {_EXACT_BELOW} THEN {unknown} ELSE {condition} END)"


def _pg_one_of(
    values: tuple[Scalar, ...], value_sql: str, kind: str, as_text: str, names: _Names, unknown: str
) -> str:
    """Equal to one of `values`: strings to strings, numbers and booleans to numbers."""
    strings = [v for v in values if isinstance(v, str) and storable(v)]
    numbers = [v for v in values if not isinstance(v, str) and not math.isnan(v)]
    parts: list[str] = []
    if strings:
        parts.append(f"COALESCE({as_text} = ANY({names.add(strings, '::text[]')}), false)")
    if numbers:
        number = _as_number(value_sql, kind, booleans=True)
        array = names.add([_decimal(n) for n in numbers], "::numeric[]")
        exact = f"COALESCE({number} = ANY({array}), false)"
        parts.append(_big_guard(number, exact, unknown, numbers))
    if not parts:
        return "false"
    return parts[0] if len(parts) == 1 else f"({parts[0]} OR {parts[1]})"


def _pg_ordered(
    bounds: tuple[tuple[str, Scalar], ...],
    value_sql: str,
    kind: str,
    as_text: str,
    names: _Names,
    unknown: str,
) -> str:
    """`value op bound` for every bound, with Python's rule on what compares.

    Strings with strings, numbers with numbers (a stored boolean never, a NaN bound never).
    The first bound decides, as in `Predicate.matches`; a later bound of the other kind would
    make the reference raise and is compiled as false.
    """
    textual = isinstance(bounds[0][1], str)
    number = _as_number(value_sql, kind, booleans=False)
    conditions: list[str] = []
    for operator, bound in bounds:
        if isinstance(bound, str) != textual:
            return "false"
        if isinstance(bound, str):
            operator, bound = _storable_bound(operator, bound)
            conditions.append(f"{as_text} {operator} {names.add(bound, '::text')}")
        elif math.isnan(bound):
            return "false"
        else:
            conditions.append(f"{number} {operator} {names.add(_decimal(bound), '::numeric')}")
    exact = f"COALESCE({' AND '.join(conditions)}, false)"
    if textual:
        return exact
    return _big_guard(number, exact, unknown, [b for _, b in bounds if not isinstance(b, str)])


def _storable_bound(operator: str, bound: str) -> tuple[str, str]:
    """A comparison with a bound PostgreSQL cannot hold, as one with a bound it can.

    Stored strings hold no NUL and no lone surrogate, so against them a bound cut before its
    first such character compares the same: `x < p + NUL + ...` is `x <= p` (nothing lies
    between), and `x < p + surrogate + ...` is `x < p + U+E000` (surrogates sit just below).
    """
    cut = next((n for n, c in enumerate(bound) if not storable(c)), None)
    if cut is None:
        return operator, bound
    prefix = bound[:cut]
    below = operator in ("<", "<=")
    if bound[cut] == "\x00":
        return ("<=" if below else ">"), prefix
    return ("<" if below else ">="), prefix + "\ue000"


def _pg_pattern(pattern: str, as_text: str, names: _Names, *, fold: bool) -> str:
    """`$like` as LIKE (literals escaped), `$ilike` as an anchored regular expression.

    In the expression each literal of the folded pattern is the class of characters folding
    to it, matched against the string with its multi-character folds (`ß` -> `ss`) expanded.
    """
    tokens = folded_tokens(pattern) if fold else like_tokens(pattern)
    if any(not storable(c) for token in tokens for c in token.chars):
        return "false"  # a character the string must hold, and no stored string holds
    if not fold:
        like = "".join(
            "%" if t.kind == "run" else "_" if t.kind == "one" else _like_literal(t.chars[0])
            for t in tokens
        )
        return f"COALESCE({as_text} LIKE {names.add(like, '::text')}, false)"
    regex = names.add("^" + "".join(_regex(t) for t in tokens) + "$", "::text")
    multi = names.add(_regex(LikeToken("char", tuple(multi_folds()))), "::text")
    return (
        f"COALESCE(CASE WHEN {as_text} ~ {multi} THEN {_pg_expanded(as_text)} ~ {regex} "
        f"ELSE {as_text} ~ {regex} END, false)"
    )


def _like_literal(char: str) -> str:
    return "\\" + char if char in "\\%_" else char


def _regex(token: LikeToken) -> str:
    """A token as a regular expression; every literal as a hexadecimal escape."""
    if token.kind == "run":
        return ".*"
    if token.kind == "one":
        return "."
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}" for c in token.chars
    )
    return escaped if len(token.chars) == 1 else f"[{escaped}]"


def _pg_expanded(text: str) -> str:
    """`text` with every multi-character fold expanded (fixed SQL: code points only)."""
    expression = text
    for char, folded in multi_folds().items():
        expression = f"replace({expression}, {_chr_sql(char)}, {_chr_sql(folded)})"
    return f'({expression}) COLLATE "C"'


def _chr_sql(text: str) -> str:
    return " || ".join(f"chr({ord(c)})" for c in text)


def _decimal(value: int | float | bool) -> Decimal:
    """A number as the JSON text Python wrote for it (`repr`), so comparisons are exact."""
    return Decimal(int(value)) if isinstance(value, bool | int) else Decimal(repr(value))


def storable(text: str) -> bool:
    """Whether PostgreSQL's `text` can hold this string (no NUL, no lone surrogate)."""
    return forbidden_character(text) is None
