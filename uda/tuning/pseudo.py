"""Questions built from the store itself, for `uda tune`: a second hop withheld-first.

A pseudo-query is a sentence of an asset A, and its answer is an asset B that shares a
selective bridge with A (an entity both mention, a page that links both). A itself is
withheld from the answer: what is measured is whether the ranking reaches B, which only the
graph can do (B's text shares little with the sentence). The sentence loses the words of
A's title, which would otherwise name A to the lexical leg.

Measured against the benchmark's real questions (ADR 38): these queries rank the PageRank
weight as the real questions do on four of five multi-hop sets, but they cannot judge the
lexical weight (every design of them favours one extreme), so only the former is tuned.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from connectors.base import RelationalCapable
from connectors.contract.graph_shape import EVERYTHING
from ontology import knowledge_asset_types

WIDEST_BRIDGE = 10  # a node joining more assets says little about any two of them
MIN_WORDS = 5  # a sentence shorter than this is a heading or a fragment
MAX_WORDS = 25  # a question, not a passage
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class PseudoQuery:
    """A sentence of `withheld` whose answer is `answer` (they share a bridge)."""

    text: str
    withheld: str
    answer: str


async def pseudo_queries(
    system_of_record: RelationalCapable, *, count: int, seed: int
) -> list[PseudoQuery]:
    """Up to `count` pseudo-queries, the same ones for the same store and seed.

    Three reads, each one statement: the selective bridges, the assets of a sample of them,
    and those assets' current states.
    """
    types = knowledge_asset_types()
    rng = random.Random(seed)  # noqa: S311 - a reproducible sample, not a secret
    bridges = await system_of_record.bridges(types, EVERYTHING, WIDEST_BRIDGE)
    # Twice as many as wanted: an asset without a usable sentence is passed over.
    sample = rng.sample(bridges, min(len(bridges), 2 * count))
    members = await system_of_record.bridge_assets(sample, types, EVERYTHING)
    pairs: list[tuple[str, str]] = []
    for node in sample:
        assets = members.get(node, [])
        if len(assets) >= 2:
            first, second = rng.sample(assets, 2)
            pairs.append((first, second))
    states = await system_of_record.fetch(sorted({a for a, _ in pairs}), None)
    queries: list[PseudoQuery] = []
    for withheld, answer in pairs:
        state = states.get(withheld)
        if state is None or withheld == answer:
            continue
        text = _sentence(str(state.payload.get("text", "")), state.name, rng)
        if text:
            queries.append(PseudoQuery(text=text, withheld=withheld, answer=answer))
        if len(queries) == count:
            break
    return queries


def _sentence(text: str, title: str, rng: random.Random) -> str:
    """A sentence of `text` without the words of `title`, at most `MAX_WORDS` words."""
    sentences = [s for s in _SENTENCE_END.split(text) if len(s.split()) >= MIN_WORDS]
    if not sentences:
        return ""
    sentence = rng.choice(sentences)
    for word in _title_words(title):
        sentence = re.sub(r"\b" + re.escape(word) + r"\b", "", sentence)
    words = sentence.split()
    return " ".join(words[:MAX_WORDS]) if len(words) >= MIN_WORDS else ""


def _title_words(title: str) -> Sequence[str]:
    """The words of a title that would name it (short words are left: they name nothing)."""
    return [w for w in re.findall(r"\w+", title) if len(w) > 3]


__all__ = ["MAX_WORDS", "MIN_WORDS", "WIDEST_BRIDGE", "PseudoQuery", "pseudo_queries"]
