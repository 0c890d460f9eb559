"""Exact matches first: which candidates match the query perfectly, and the boost they get.

A candidate is a *perfect match* when

- **name**: the query equals its name, both case-folded (`str.casefold`) and with runs of
  whitespace folded to one space and the ends stripped; or
- **phrase**: a phrase the query quotes (`"..."` or `“...”`) occurs verbatim in its name or
  in the text of a chunk a leg returned for it: case-insensitive, any run of whitespace in
  the phrase matching any run in the text, on word boundaries at the ends that are word
  characters (`"rate limit"` matches `Rate  limit,` but not `rate limiter`); trailing
  `. , ; : ! ?` inside the quotes are dropped; or
- **identifier**: an identifier-like token of the query occurs there verbatim,
  case-insensitive, as a whole token: not preceded by a word character or by a word character
  and `-`/`.`, not followed by a word character or by `-`/`.` and a word character
  (`PAY-1234` matches `(PAY-1234).` but not `PAY-12345`, `PAY-1234-2`, `xPAY-1234` or
  `PAY-1234_old`).

A token is a whitespace-separated word of the query without leading and trailing characters
that are neither letters nor digits. It is *identifier-like* when it is ASCII letters and
digits in runs joined by single `-`, `_` or `.`, at least 3 characters long, and

- has a letter and a run of at least three digits (`zx0000q`, `PAY-1234`, `KEP-1287`,
  `rs647161`, a UUID), or
- has an `_` between two runs (`expand_depth`, `MAX_POOL`), or
- is a hexadecimal number of at least 7 digits with a letter and a digit (`3f2a9c1`, a
  commit).

The rule is kept narrow on purpose: words of ordinary language never qualify, and nor do the
short mixed tokens of scientific prose (`p53`, `IL-6`, `APOE4`, `H3K4me3`), which occur in
many passages besides the relevant one. 90 of SciFact's 300 test claims hold a token with a
letter and a digit; boosting every passage holding it, over a BM25-only ranking (an offline
check, not the benchmark), changed the top 10 of 40 claims and nDCG@10 by up to 0.64 on
one, in both directions. These rules find an identifier in 6 claims (`rs647161`, `N348I`,
`K164`, `CK-666`, `p150n`, `400mg`) and a quoted phrase in none.

Matching is on the raw text, not on the lexical analyzer's terms: the analyzer splits
`PAY-1234` into `pay` and `1234`, which occur apart in many texts.

How a match ranks (`exact_boost`): its fused score plus a boost above the largest fused score
any candidate can reach, so every perfect match ranks before every other candidate and
perfect matches rank among themselves by their fused score. The ranking is decided in phase 3
over the visible candidates only: a match is never a reason to show anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np

from uda.query.fusion import Fusion, Leg

BOOST_FACTOR = 1.05
"""A perfect match's boost over the largest fused score a candidate can reach."""

_QUOTED = re.compile(r'"([^"]*)"|“([^”]*)”')  # quotes pair in order, empty pairs too
_TRAILING = ".,;:!?"
_EDGE = re.compile(r"^[^0-9A-Za-z]+|[^0-9A-Za-z]+$")
_SHAPE = re.compile(r"[0-9A-Za-z]+(?:[-_.][0-9A-Za-z]+)*")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")
_DIGITS_RUN = re.compile(r"[0-9]{3}")
_DIGIT_RUNS = re.compile(r"[0-9]+")
_SEPARATOR = "\x00"
_HEX = re.compile(r"[0-9A-Fa-f]{7,}")
# A whole token: no word character, nor a word character joined by - or ., on either side.
_BEFORE = r"(?<!\w)(?<!\w[-.])"
_AFTER = r"(?![-.]?\w)"


class MatchKind(StrEnum):
    """How a candidate matches the query perfectly, strongest first."""

    NAME = "name"
    PHRASE = "phrase"
    IDENTIFIER = "identifier"


@dataclass(frozen=True, kw_only=True)
class ExactMatch:
    """A perfect match: its kind and the query's term that matched (the query for `name`)."""

    kind: MatchKind
    term: str


def fold(text: str) -> str:
    """Case and whitespace folded: how a query is compared with a name."""
    return " ".join(text.casefold().split())


def is_identifier(token: str) -> bool:
    """Whether a token (already without leading and trailing punctuation) is identifier-like.

    See the module doc for the rule.
    """
    if len(token) < 3 or not _SHAPE.fullmatch(token):
        return False
    if _LETTER.search(token) and _DIGITS_RUN.search(token):
        return True
    if "_" in token:
        return True
    return bool(_HEX.fullmatch(token) and _LETTER.search(token) and _DIGIT.search(token))


def identifiers(query: str) -> tuple[str, ...]:
    """The query's identifier-like tokens, in order, without repeats (case-insensitive)."""
    out: dict[str, str] = {}
    for word in query.split():
        token = _EDGE.sub("", word)
        if is_identifier(token):
            out.setdefault(token.casefold(), token)
    return tuple(out.values())


def phrases(query: str) -> tuple[str, ...]:
    """The phrases the query quotes, whitespace folded, without repeats (case-insensitive).

    Only balanced quotes count; a phrase needs a letter or digit.
    """
    out: dict[str, str] = {}
    for match in _QUOTED.finditer(query):
        quoted = match.group(1) if match.group(1) is not None else match.group(2) or ""
        phrase = " ".join(quoted.split()).rstrip(_TRAILING).strip()
        if any(c.isalnum() for c in phrase):
            out.setdefault(phrase.casefold(), phrase)
    return tuple(out.values())


def _phrase_pattern(phrase: str) -> str:
    body = r"\s+".join(re.escape(word) for word in phrase.split())
    before = r"(?<!\w)" if re.match(r"\w", phrase) else ""
    after = r"(?!\w)" if re.search(r"\w$", phrase) else ""
    return before + body + after


@dataclass(frozen=True)
class _Term:
    kind: MatchKind
    term: str
    pattern: re.Pattern[str]
    # What a text must contain for the pattern to match: a cheap test first. Digits have no
    # case, so a run of them is looked for in the text as it is; else the lower-cased text.
    probe: str
    caseless: bool

    @staticmethod
    def of(kind: MatchKind, term: str, pattern: str) -> _Term:
        digits = max(_DIGIT_RUNS.findall(term), key=len, default="")
        if len(digits) >= 3:
            probe, caseless = digits, True
        else:
            probe, caseless = max(term.split(), key=len).lower(), False
        return _Term(kind, term, re.compile(pattern, re.IGNORECASE), probe, caseless)


@dataclass(frozen=True)
class ExactQuery:
    """What of a query can match perfectly: its folded form, its phrases and identifiers.

    Build it with `ExactQuery.of(query)`; `match` tells how a candidate matches.
    """

    folded: str
    terms: tuple[_Term, ...]

    @staticmethod
    def of(query: str | None) -> ExactQuery:
        """The exact-match view of a query (no query: nothing matches)."""
        return _exact_query(query or "")

    def names(self, name: str) -> bool:
        """Whether the query is this name, both folded (the name rule).

        Phase 3 asks it of every candidate: most names are told apart by their case-folded
        length or first word before any whitespace is folded (folding never lengthens).
        """
        if not self.folded:
            return False
        folded = name.casefold()
        if folded == self.folded:
            return True
        if len(folded) < len(self.folded) or self.folded.split(" ", 1)[0] not in folded:
            return False
        return " ".join(folded.split()) == self.folded

    def match(self, name: str, texts: Iterable[str]) -> ExactMatch | None:
        """How a candidate with this name and these chunk texts matches, or None.

        The strongest kind wins: name, then phrase, then identifier (in query order).
        """
        if self.names(name):
            return ExactMatch(kind=MatchKind.NAME, term=self.folded)
        if not self.terms:
            return None
        # One string to search: NUL is neither a word character nor whitespace, so no term
        # matches across two texts, and it bounds a token like the end of a text does.
        joined = _SEPARATOR.join([name, *texts])
        lowered: str | None = None
        for term in self.terms:
            if term.caseless:
                if term.probe not in joined:
                    continue
            else:
                if lowered is None:
                    lowered = joined.lower()
                if term.probe not in lowered:
                    continue
            if term.pattern.search(joined):
                return ExactMatch(kind=term.kind, term=term.term)
        return None


@lru_cache(maxsize=256)
def _exact_query(query: str) -> ExactQuery:
    terms: list[_Term] = []
    for phrase in phrases(query):
        terms.append(_Term.of(MatchKind.PHRASE, phrase, _phrase_pattern(phrase)))
    for token in identifiers(query):
        pattern = _BEFORE + re.escape(token) + _AFTER
        terms.append(_Term.of(MatchKind.IDENTIFIER, token, pattern))
    return ExactQuery(folded=fold(query), terms=tuple(terms))


def score_ceiling(fusion: Fusion, weights: Mapping[Leg, float]) -> float:
    """The largest fused score a candidate can reach: ranked first by every leg."""
    first = np.ones(1, dtype=np.int64)
    parts = fusion.leg_contributions(dict.fromkeys(Leg, first), weights)
    return sum(float(column[0]) for column in parts.values())


def exact_boost(fusion: Fusion, weights: Mapping[Leg, float], fused: Iterable[float]) -> float:
    """What a perfect match adds to its fused score: `BOOST_FACTOR` x the score ceiling.

    The ceiling is that of a candidate ranked first by every leg, so the boost depends on
    the weights only and scores stay comparable between searches; the best fused score of
    this search raises it only for a fusion whose scores can exceed that (not RRF's). When
    nothing can score at all (every weight zero), the boost is 1.
    """
    ceiling = max(score_ceiling(fusion, weights), max(fused, default=0.0))
    return BOOST_FACTOR * ceiling if ceiling > 0 else 1.0


__all__ = [
    "BOOST_FACTOR",
    "ExactMatch",
    "ExactQuery",
    "MatchKind",
    "exact_boost",
    "fold",
    "identifiers",
    "is_identifier",
    "phrases",
    "score_ceiling",
]
