r"""`$like` and `$ilike` patterns taken apart, for stores that compile them.

`Predicate.matches` reads a pattern with `connectors.contract.predicates.like`: `%` any run of
characters, `_` any one character, `\` escapes the next (a trailing one stands for itself),
and `$ilike` compares `str.casefold()` of both sides. A store that compiles a pattern needs
the same reading, so it lives here, beneath every store:

- `like_tokens` splits a pattern exactly as `like` does.
- `folded_tokens` gives, for `$ilike`, each literal of the folded pattern as the set of
  characters whose fold it is, so that a store can match the *unfolded* text with character
  classes (`[kK]` plus the Kelvin sign): no store folds text the way Python does.
- `multi_folds` names the characters whose fold is longer than one character (`ß` -> `ss`);
  a store replaces them in the text by their folds first, after which the text folds
  character by character and the classes match exactly.

The tables are computed from the running interpreter's `str.casefold`, so they agree with
`Predicate.matches` whatever its Unicode version.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

TokenKind = Literal["run", "one", "char"]


@dataclass(frozen=True, slots=True)
class LikeToken:
    """One token of a pattern: `run` (`%`), `one` (`_`), or a literal set of characters.

    `chars` is empty for wildcards; for a literal it lists every character the token matches
    (one character for `$like`, each character folding to the literal for `$ilike`).
    """

    kind: TokenKind
    chars: tuple[str, ...] = ()


RUN = LikeToken("run")
ONE = LikeToken("one")


def like_tokens(pattern: str) -> list[LikeToken]:
    """The tokens of a `$like` pattern, as `connectors.contract.predicates.like` reads it."""
    tokens: list[LikeToken] = []
    escaped = False
    for char in pattern:
        if escaped:
            tokens.append(LikeToken("char", (char,)))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            if not tokens or tokens[-1] is not RUN:  # `%%` is one `%`
                tokens.append(RUN)
        elif char == "_":
            tokens.append(ONE)
        else:
            tokens.append(LikeToken("char", (char,)))
    if escaped:  # a trailing backslash stands for itself
        tokens.append(LikeToken("char", ("\\",)))
    return tokens


def folded_tokens(pattern: str) -> list[LikeToken]:
    """The tokens of an `$ilike` pattern over text whose multi-character folds were expanded.

    The pattern is folded first (as `like(..., fold_case=True)` does), then each literal
    becomes the characters that fold to it. Matched against text in which every character
    of `multi_folds()` was replaced by its fold, these tokens agree with `$ilike` exactly.
    """
    preimages = _tables()[0]
    return [
        LikeToken("char", preimages.get(t.chars[0], t.chars)) if t.kind == "char" else t
        for t in like_tokens(pattern.casefold())
    ]


def multi_folds() -> Mapping[str, str]:
    """Characters whose `casefold()` is longer than one character, with their folds."""
    return _tables()[1]


@functools.cache
def _tables() -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """(fold -> characters folding to it, where more than itself; multi-character folds).

    One pass over every code point (about 0.2 s, once per process). The construction relies
    on `casefold` being idempotent and on multi-character folds consisting of characters that
    fold to themselves; both are checked here, so a future Unicode table that broke them
    fails loudly instead of compiling a wrong pattern.
    """
    preimages: dict[str, set[str]] = {}
    multi: dict[str, str] = {}
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        folded = char.casefold()
        if folded == char:
            continue
        if len(folded) == 1:
            preimages.setdefault(folded, {folded}).add(char)
        else:
            multi[char] = folded
    for target in preimages:
        if target.casefold() != target or target in multi:  # pragma: no cover - Unicode drift
            raise RuntimeError(f"casefold is not idempotent on {target!r}")
    for folded in multi.values():
        if any(c in multi or c.casefold() != c for c in folded):  # pragma: no cover
            raise RuntimeError(f"multi-character fold {folded!r} does not fold to itself")
    return {k: tuple(sorted(v)) for k, v in preimages.items()}, multi


__all__ = ["ONE", "RUN", "LikeToken", "TokenKind", "folded_tokens", "like_tokens", "multi_folds"]
