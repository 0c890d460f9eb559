"""The `auto_search` router: pick a retrieval strategy from the query text alone.

Pure functions, no I/O. Exact-word signals (quoted phrases, identifiers such as
`snake_case`, `CamelCase`, `ABC-123`, paths, acronyms, proper nouns) lean towards the
lexical leg, because embeddings blur exactly the tokens that such queries depend on.
Questions and conceptual phrasings lean towards the dense leg, because they rarely share
words with the passage that answers them. The result says what it chose and why, so an
agent (or a person reading a trace) can disagree and call `hybrid_search` instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from uda.agent.models import Strategy
from uda.query.fusion import Leg

# How strongly each kind of lexical signal leans: a quoted phrase is an explicit request
# for those exact words; an identifier is nearly as strong; a capitalised name is weaker
# (it may be a sentence's subject written with a capital).
_QUOTED = re.compile(
    r"\"([^\"]{2,})\"|“([^”]{2,})”|`([^`]{1,})`|(?:^|\s)'([^']{2,})'(?=$|[\s?.,!;:])"
)
_IDENTIFIERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ticket or key", re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b")),
    ("snake_case identifier", re.compile(r"\b[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+\b")),
    ("CamelCase identifier", re.compile(r"\b[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*\b")),
    ("path", re.compile(r"(?:^|(?<=\s))(?:~|\.{1,2})?/?[\w.-]+/[\w./-]*\w")),
    (
        "file name",
        re.compile(
            r"\b[\w-]+\.(?:py|md|rst|txt|toml|ya?ml|json|ts|js|go|rs|java|sql|sh|cfg|ini)\b"
        ),
    ),
    ("dotted name", re.compile(r"\b[a-z_][a-z0-9_]+(?:\.[a-z_][a-z0-9_]+)+\b")),
    ("call", re.compile(r"\b\w+\(\)")),
    ("flag", re.compile(r"(?:^|(?<=\s))--?[a-z][\w-]*")),
    ("version", re.compile(r"\bv?\d+\.\d+(?:\.\d+)+\b")),
    ("hash", re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")),
)
_ACRONYM = re.compile(r"\b[A-Z]{2,}[0-9]*s?\b")
_WORD = re.compile(r"[A-Za-z][\w'-]*")
_CAPITALISED = re.compile(r"[A-Z][a-z]+")
# fmt: off
_QUESTION_WORDS = frozenset((
    "who", "what", "when", "where", "why", "how", "which", "whose", "whom",
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "should", "would",
    "will", "may", "might", "explain", "describe", "compare", "summarise", "summarize",
))
# fmt: on
# Acronyms that are ordinary words in a question, not search terms.
_COMMON_CAPS = frozenset({"I", "OK", "A"})


@dataclass(frozen=True, kw_only=True)
class Route:
    """The router's decision: a strategy, the lexical weight, and why."""

    strategy: Strategy  # "semantic" or "hybrid"
    text_weight: float
    reason: str
    signals: tuple[str, ...]


def lexical_signals(query: str) -> list[str]:
    """Exact-word signals in a query, each as `kind: text`, in a stable order."""
    signals: list[str] = []
    rest = query
    for match in _QUOTED.finditer(query):
        phrase = next(g for g in match.groups() if g)
        signals.append(f"quoted phrase: {phrase}")
        rest = rest.replace(match.group(0), " ")
    seen: set[str] = set()
    for kind, pattern in _IDENTIFIERS:
        for match in pattern.finditer(rest):
            token = match.group(0).strip()
            if token.lower() in {"e.g", "i.e"} or token in seen:
                continue
            seen.add(token)
            signals.append(f"{kind}: {token}")
    for match in _ACRONYM.finditer(rest):
        token = match.group(0)
        if token not in _COMMON_CAPS and not any(token in s for s in seen):
            seen.add(token)
            signals.append(f"acronym: {token}")
    signals += [f"proper noun: {name}" for name in proper_nouns(rest) if name not in seen]
    return signals


def proper_nouns(query: str) -> list[str]:
    """Capitalised words that do not start a sentence (likely names)."""
    names: list[str] = []
    sentence_start = True
    for match in _WORD.finditer(query):
        word = match.group(0)
        before = query[: match.start()].rstrip()
        if before and before[-1] in ".?!:\n":
            sentence_start = True
        if not sentence_start and _CAPITALISED.fullmatch(word):
            names.append(word)
        sentence_start = False
    return names


def is_question(query: str) -> bool:
    """A question: ends with `?` or starts with a question word."""
    words = _WORD.findall(query.lower())
    return query.rstrip().endswith("?") or bool(words and words[0] in _QUESTION_WORDS)


def route_query(query: str) -> Route:
    """Pick a strategy for `query`.

    Lexical signals lean lexical (`text_weight` above 0.5), questions and longer
    natural-language phrasings lean semantic, short keyword queries get both legs equally.
    """
    signals = lexical_signals(query)
    strong = [s for s in signals if not s.startswith(("proper noun", "acronym"))]
    weak = [s for s in signals if s.startswith(("proper noun", "acronym"))]
    question = is_question(query)
    words = len(_WORD.findall(query))
    shown = "; ".join(signals[:4]) + ("; ..." if len(signals) > 4 else "")
    if strong:
        weight = 0.6 if question else 0.8
        why = "exact-word signals (" + shown + ")"
        why += ", in a question" if question else ""
        return Route(
            strategy="hybrid", text_weight=weight, reason=_say(why, weight), signals=tuple(signals)
        )
    if weak:
        weight = 0.5 if question else 0.65
        why = "names or acronyms (" + shown + ")" + (", in a question" if question else "")
        return Route(
            strategy="hybrid", text_weight=weight, reason=_say(why, weight), signals=tuple(signals)
        )
    if question:
        return Route(
            strategy="semantic",
            text_weight=0.0,
            reason="a question with no exact-word signals: search by meaning only",
            signals=("question",),
        )
    if words <= 3:
        return Route(
            strategy="hybrid",
            text_weight=0.5,
            reason=_say("a short keyword query", 0.5),
            signals=("keywords",),
        )
    return Route(
        strategy="hybrid",
        text_weight=0.3,
        reason=_say("a descriptive phrase (a concept, not exact words)", 0.3),
        signals=("concept",),
    )


def _say(why: str, weight: float) -> str:
    lean = "exact words" if weight > 0.5 else "meaning" if weight < 0.5 else "neither leg"
    return f"{why}: hybrid with text_weight {weight:g}, leaning on {lean}"


def hybrid_weights(text_weight: float) -> dict[Leg, float]:
    """Semantic and lexical weights in the ratio `(1 - t) : t`, the stronger one at 1.0.

    Scaling so that the stronger leg keeps weight 1.0 leaves the graph leg's weight (from
    the profile) in the same proportion as in the default fusion: `t = 0.5` is the default.
    """
    if not 0.0 <= text_weight <= 1.0:
        raise ValueError("text_weight must be within [0, 1]")
    top = max(text_weight, 1.0 - text_weight)
    return {Leg.SEMANTIC: (1.0 - text_weight) / top, Leg.LEXICAL: text_weight / top}


def strategy_weights(strategy: Strategy, text_weight: float | None) -> Mapping[Leg, float] | None:
    """The fusion weights of a strategy (None: the profile's defaults)."""
    if strategy == "semantic":
        return {Leg.SEMANTIC: 1.0, Leg.LEXICAL: 0.0}
    if strategy == "hybrid":
        return hybrid_weights(0.5 if text_weight is None else text_weight)
    return None
