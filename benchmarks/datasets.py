"""Public retrieval sets (BEIR format) and the graphs the multi-hop sets get, without any model.

- `read_beir`: `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`.
- `subset`: the first n judged queries (sorted by id) with their relevant documents and a
  seeded sample of the others, for the small presets.
- `openie_graph`: `hipporag_musique/openie_triples.json` -> passage -mentions-> entity edges.
- `title_mention_graph`: passage -mentions-> passage whose title it contains (whole words,
  case-sensitive), for the sets without triples.

The multi-hop graphs need a node type for entities and a relation for mentions; both are
registered here through the ontology's own extension points (`Element` subclass,
`register_relation`), as a user would.
"""

from __future__ import annotations

import csv
import json
import random
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.synonyms import SYNONYM_THRESHOLD, Embed, synonym_groups
from ontology import Document, Element, Relation
from ontology.registry import RelationSpec, register_relation

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
MULTIHOP_SETS = (
    "hipporag_musique",
    "hipporag_hotpotqa",
    "migres_hotpotqa",
    "migres_musique",
    "migres_2wiki",
)
MENTIONS = "mentions"
DOC_PREFIX = "p:"
ENTITY_PREFIX = "ent:"
# One fixed date for every benchmark passage: decay then scales every score alike.
CORPUS_DATE = "2024-01-01T00:00:00Z"

register_relation(
    RelationSpec(
        name=MENTIONS,
        sources=("KnowledgeAsset",),
        targets=("Element",),
        description="a passage mentions an entity or another passage's subject",
    )
)


class Entity(Element):
    """A named entity of a multi-hop graph: a context-only node that links passages."""


@dataclass(frozen=True, kw_only=True)
class BeirSet:
    """A retrieval set: corpus (id -> (title, text)), queries (id -> text), judgements."""

    name: str
    corpus: Mapping[str, tuple[str, str]]
    queries: Mapping[str, str]
    qrels: Mapping[str, Mapping[str, int]]

    @property
    def judged_queries(self) -> dict[str, str]:
        """Queries that have at least one judgement, by id (sorted)."""
        return {q: self.queries[q] for q in sorted(self.qrels) if q in self.queries}


@dataclass(frozen=True, kw_only=True)
class Graph:
    """Edges of a derived graph: passage -> entity and passage -> passage, by dataset ids."""

    entities: Mapping[str, str] = field(default_factory=dict[str, str])  # entity id -> name
    passage_entity: tuple[tuple[str, str], ...] = ()
    passage_passage: tuple[tuple[str, str], ...] = ()
    source: str = ""

    @property
    def edge_count(self) -> int:
        """Number of edges of both kinds."""
        return len(self.passage_entity) + len(self.passage_passage)


def read_beir(folder: Path, split: str = "test") -> BeirSet:
    """Read a BEIR-format folder; queries keep only those present in the split's qrels."""
    corpus: dict[str, tuple[str, str]] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                corpus[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8", newline="") as table:
        reader = csv.reader(table, delimiter="\t")
        next(reader, None)  # header
        for row in reader:
            if len(row) >= 3 and row[1] in corpus:
                qrels[row[0]][row[1]] = int(row[2])
    queries: dict[str, str] = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                if str(row["_id"]) in qrels:
                    queries[str(row["_id"])] = str(row["text"])
    judged = {q: dict(r) for q, r in qrels.items() if q in queries}
    return BeirSet(name=folder.name, corpus=corpus, queries=queries, qrels=judged)


def subset(data: BeirSet, *, queries: int | None, docs: int | None, seed: int = 13) -> BeirSet:
    """The first `queries` judged queries, their relevant docs, and sampled others up to `docs`.

    None keeps everything. The sample is seeded, so a preset always sees the same corpus.
    """
    kept_queries = list(data.judged_queries)
    if queries is not None:
        kept_queries = kept_queries[:queries]
    qrels = {q: data.qrels[q] for q in kept_queries}
    if docs is None and queries is None:
        corpus_ids = list(data.corpus)
    else:
        needed = {d for rel in qrels.values() for d in rel}
        others = sorted(set(data.corpus) - needed)
        room = max(0, (docs if docs is not None else len(data.corpus)) - len(needed))
        corpus_ids = sorted(
            needed | set(random.Random(seed).sample(others, min(room, len(others))))
        )
    return BeirSet(
        name=data.name,
        corpus={d: data.corpus[d] for d in corpus_ids},
        queries={q: data.queries[q] for q in kept_queries},
        qrels=qrels,
    )


def passage_text(title: str, text: str) -> str:
    """How every system embeds a whole passage: title line, then text (BEIR's title + text)."""
    return f"{title}\n{text}" if title else text


def documents(data: BeirSet) -> list[Document]:
    """The corpus as `Document`s: name = title, text = body, public, one fixed date."""
    out: list[Document] = []
    for doc_id, (title, text) in data.corpus.items():
        body = text.strip() or title.strip() or doc_id
        out.append(
            Document(
                element_id=DOC_PREFIX + doc_id,
                name=(title.strip() or doc_id)[:1000],
                text=body,
                sensitivity="public",
                timestamp=CORPUS_DATE,
            )
        )
    return out


def graph_elements(graph: Graph) -> tuple[list[Element], list[Relation]]:
    """The entities of a graph as elements, and its edges as `mentions` relations."""
    entities: list[Element] = [
        Entity(element_id=eid, name=name[:1000], sensitivity="public", timestamp=CORPUS_DATE)
        for eid, name in graph.entities.items()
    ]
    relations = [
        Relation(source_id=DOC_PREFIX + p, relation=MENTIONS, target_id=e)
        for p, e in graph.passage_entity
    ]
    relations += [
        Relation(source_id=DOC_PREFIX + a, relation=MENTIONS, target_id=DOC_PREFIX + b)
        for a, b in graph.passage_passage
    ]
    return entities, relations


_PUNCT_EDGES = re.compile(r"^[\W_]+|[\W_]+$")
_SPACES = re.compile(r"\s+")


def normalise_entity(name: str) -> str:
    """Case-folded, accent-folded, whitespace-collapsed, without edge punctuation or 'the '.

    A cheap stand-in for the synonymy edges of HippoRAG: 'The Beatles' and 'beatles' meet.
    """
    folded = unicodedata.normalize("NFKD", name)
    folded = "".join(c for c in folded if not unicodedata.combining(c)).casefold()
    folded = _SPACES.sub(" ", _PUNCT_EDGES.sub("", folded.strip()))
    return folded.removeprefix("the ").strip()


def openie_graph(folder: Path, corpus_ids: Iterable[str], embed: Embed | None = None) -> Graph:
    """Passage -> entity edges from the OpenIE triples (subjects and objects of each passage).

    The triples file lists passages in corpus order. Entities are normalised
    (`normalise_entity`); a passage whose title names an entity is linked to it too. With
    `embed`, names whose embeddings nearly coincide become one entity (`benchmarks.synonyms`).
    Only entities that link two or more of the loaded passages are kept: an entity of one
    passage connects nothing and would only inflate that passage's degree.
    """
    data = json.loads((folder / "openie_triples.json").read_text(encoding="utf-8"))
    order: list[str] = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        order = [str(json.loads(line)["_id"]) for line in lines if line.strip()]
    wanted = set(corpus_ids)
    mentions: dict[str, set[str]] = defaultdict(set)  # normalised entity -> passages
    names: dict[str, str] = {}
    for doc_id, entry in zip(order, data["docs"], strict=False):
        if doc_id not in wanted:
            continue
        surface: list[str] = [entry.get("title") or ""]
        for triple in entry.get("extracted_triples") or []:
            if isinstance(triple, list) and len(triple) == 3:
                surface += [str(triple[0]), str(triple[2])]
        for name in surface:
            key = normalise_entity(name)
            if len(key) >= 2:
                mentions[key].add(doc_id)
                names.setdefault(key, name.strip())
    source = "openie-triples"
    if embed is not None:
        keys = sorted(mentions)
        groups = synonym_groups([names[k] or k for k in keys], embed, SYNONYM_THRESHOLD)
        merged: dict[str, set[str]] = defaultdict(set)
        for key, group in zip(keys, groups, strict=True):
            merged[keys[group]] |= mentions[key]
        mentions = merged
        source += f" + synonyms (cosine >= {SYNONYM_THRESHOLD:g})"
    entities: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    for index, key in enumerate(sorted(k for k, p in mentions.items() if len(p) >= 2)):
        eid = f"{ENTITY_PREFIX}{index}"
        entities[eid] = names[key] or key
        edges += [(p, eid) for p in sorted(mentions[key])]
    return Graph(entities=entities, passage_entity=tuple(edges), source=source)


_WORDS = re.compile(r"\w+")


def title_mention_graph(corpus: Mapping[str, tuple[str, str]], min_chars: int = 4) -> Graph:
    """Passage -> passage edges where a passage's text contains another's title.

    Whole-word, case-sensitive matches of titles of at least `min_chars` characters. Candidate
    passages are found through the title's rarest word, then checked with a regex.
    """
    words_of: dict[str, set[str]] = {}
    index: dict[str, set[str]] = defaultdict(set)
    for doc_id, (_, text) in corpus.items():
        words = set(_WORDS.findall(text))
        words_of[doc_id] = words
        for word in words:
            index[word].add(doc_id)
    edges: set[tuple[str, str]] = set()
    titles: dict[str, list[str]] = defaultdict(list)
    for doc_id, (title, _) in corpus.items():
        if len(title.strip()) >= min_chars:
            titles[title.strip()].append(doc_id)
    for title, targets in sorted(titles.items()):
        title_words = _WORDS.findall(title)
        if not title_words:
            continue
        rarest = min(title_words, key=lambda w: len(index.get(w, ())))
        candidates = index.get(rarest, set())
        if not candidates:
            continue
        pattern = re.compile(r"(?<!\w)" + re.escape(title) + r"(?!\w)")
        for doc_id in candidates:
            if not set(title_words) <= words_of[doc_id]:
                continue
            if pattern.search(corpus[doc_id][1]):
                edges.update((doc_id, t) for t in targets if t != doc_id)
    return Graph(passage_passage=tuple(sorted(edges)), source="title-mentions")


def multihop_graph(folder: Path, data: BeirSet, embed: Embed | None = None) -> Graph:
    """The graph a multi-hop set gets: OpenIE triples where shipped, title mentions otherwise.

    `embed` (the benchmark's embedding model) merges synonymous OpenIE entities; the
    title-mention graph needs no model.
    """
    if (folder / "openie_triples.json").exists():
        return openie_graph(folder, data.corpus, embed)
    return title_mention_graph(data.corpus)
