"""Query entities: the graph nodes a query names, and the candidates linked to them.

A query that names a node of the graph ("sig-apps enhancement proposals", "proposals by
thockin", "Which KEP replaced Decouple PodGroup API?") says which part of the graph it is
about. The context mode turns that into a ranked leg of its own (`Leg.ENTITY`, ADR 47): the
candidates that are such a node, or are one edge away from one, ranked among themselves in
the order the other legs' fusion gives them.

A node is *named* by the query when its name's words occur in the query's words, in order
and next to each other. Words are whitespace-separated, case-folded (`str.casefold`), with
leading and trailing characters that are neither letters nor digits dropped, so `sig-apps`,
`sig-apps?` and `SIG-Apps` are one word and `apps` is another. A name needs a letter and at
least `MIN_NAME_CHARS` characters, and two words or one word that is more than letters
(`sig-apps`, `kube-proxy`, `k8s`): as in `uda.query.exact`, a word of ordinary language never
qualifies alone, so a document titled "Overview" or "Rollouts" is not named by every query
that uses the word, and neither is a person's one-word handle (name them with more).

Only nodes the caller may see take part: phase 3 hands in the names of visible nodes and the
adjacency of visible edges, so a hidden node never lifts a candidate, and nothing about it
can be read from a ranking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from uda.query.graph_context import Adjacency

MIN_NAME_CHARS = 3


# What a word is trimmed of at either end: anything but a letter or a digit.
_OUTER = re.compile(r"^[\W_]+|[\W_]+$")
_LETTER = re.compile(r"[^\W\d_]")


def _trimmed(raw: str) -> str:
    return raw if raw.isalnum() else _OUTER.sub("", raw)  # most words need no trimming


def words(text: str) -> tuple[str, ...]:
    """The text's words: split on whitespace, case-folded, trimmed of outer punctuation."""
    return tuple(word for word in map(_trimmed, text.casefold().split()) if word)


@dataclass(frozen=True)
class QueryWords:
    """A query's words, with where each word occurs (for the contiguous-match test)."""

    sequence: tuple[str, ...]
    positions: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, query: str) -> QueryWords:
        """The words of `query`."""
        sequence = words(query)
        positions: dict[str, list[int]] = {}
        for at, word in enumerate(sequence):
            positions.setdefault(word, []).append(at)
        return cls(sequence, {w: tuple(p) for w, p in positions.items()})

    def names(self, name: str) -> bool:
        """True when `name`'s words occur in the query's, in order and next to each other."""
        wanted = name_words(name)
        starts = self.positions.get(wanted[0]) if wanted else None
        if not starts:
            return False
        count = len(wanted)
        return count == 1 or any(self.sequence[at : at + count] == wanted for at in starts)


@lru_cache(maxsize=1 << 16)
def name_words(name: str) -> tuple[str, ...]:
    """The words a query must hold to name a node of this name (none: it cannot be named).

    Cached: a search tests the name of every node its expansion reached, hundreds of them,
    and the same nodes (a repository, a team) come back search after search.
    """
    if len(name) < MIN_NAME_CHARS or _LETTER.search(name) is None:
        return ()
    wanted = words(name)
    if len(wanted) == 1 and wanted[0].isalpha():
        return ()  # one ordinary word: too common to stand for a node
    return wanted


def may_name_any(asked: QueryWords, names: Iterable[str]) -> bool:
    """False when no name's first word is a query word, so that the query names no node.

    Most queries name nothing. This tells so from one regular-expression scan of all the
    names, at C speed, rather than a test per node: each node's test touches its id, its
    name and the cache, about 1 µs per node, most of a millisecond a search at depth 2.
    A True may be wrong (a line break inside a name, a name too short to count); the test
    per node decides then.
    """
    text = "\n" + "\n".join(names).casefold()
    return not asked.positions.keys().isdisjoint(_FIRST_WORDS.findall(text))


# Each name's first word, as `words` trims it: after the line break, any non-word characters
# (and words trimmed to nothing), then from the first letter or digit to the last one before
# a space. The literal line break first lets the engine jump from name to name.
_FIRST_WORDS = re.compile(r"\n[\W_]*([^\W_](?:\S*[^\W_])?)")


def linked_candidates(
    query: str,
    candidates: Iterable[str],
    adj: Adjacency,
    names: Mapping[str, str],
) -> dict[str, tuple[str, ...]]:
    """Per candidate linked to a node the query names: those nodes' names (sorted).

    A candidate is linked when it is a named node of the graph (it has an edge in `adj`) or
    an edge of `adj` joins it to one. `names` holds the visible nodes' names; a node without
    a name there names nothing.
    """
    asked = QueryWords.of(query)
    if not asked.sequence or not may_name_any(asked, names.values()):
        return {}
    # Which nodes are named, once per node: most are not, and most names are cached.
    ends = {candidate: adj.get(candidate, ()) for candidate in candidates}
    nodes = {node for edges in ends.values() if edges for node, _, _ in edges}
    nodes.update(candidate for candidate, edges in ends.items() if edges)
    named = {node for node in nodes if asked.names(names.get(node, ""))}
    if not named:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for candidate, edges in ends.items():
        if not edges:
            continue  # not in the graph: no entity, and nothing links it to one
        hits = {names[node] for node, _, _ in edges if node in named}
        if candidate in named:
            hits.add(names[candidate])
        if hits:
            out[candidate] = tuple(sorted(hits))
    return out


__all__ = [
    "MIN_NAME_CHARS",
    "QueryWords",
    "linked_candidates",
    "may_name_any",
    "name_words",
    "words",
]
