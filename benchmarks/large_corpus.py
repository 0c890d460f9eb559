"""The answers suite's corpus: large documents of real passages, and their embedder.

`LargeCorpus` builds the seeded estate of large `Document`s, `Repository`s and
`Decision`s that `benchmarks/suites/answers.py` measures answers on; `PassageEmbedder`
embeds each chunk's own text, so that the corpus costs one embedding per distinct passage
chunk. The suite's docstring says why.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path

import numpy as np

from benchmarks.datasets import MULTIHOP_SETS
from ontology import Decision, DecisionStatus, Document, Element, Relation, Repository, Sensitivity
from uda.embedding import Embedder, Vector

SEED = 23
POOL = 6_000  # passages documents are drawn from: about 9,000 distinct chunks
REPOSITORIES = 10
DOCS_PER_DECISION = 10
MAX_DECISIONS = 10
LEVEL = Sensitivity.INTERNAL  # every element of the corpus
EPOCH = datetime(2025, 6, 1, tzinfo=UTC)
INGEST_BATCH = 20  # documents per `client.ingest` call (20 x 200 KB, about 4,000 chunks)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
QUERY_WORDS = (8, 60)  # a question is a sentence of this many words


def read_passages(data: Path) -> list[tuple[str, str]]:
    """(title, text) of every passage of SciFact and the multi-hop sets present under `data`,
    in file order, each text once."""
    folders = [data / "scifact", *(data / "multihop" / name for name in MULTIHOP_SETS)]
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for folder in folders:
        path = folder / "corpus.jsonl"
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                row = json.loads(line)
                text = " ".join(str(row.get("text") or "").split())
                if text and text not in seen:
                    seen.add(text)
                    out.append((" ".join(str(row.get("title") or "").split()), text))
    return out


def section(title: str, text: str) -> str:
    """A passage as a section: its heading paragraph (where the chunker starts a new chunk)
    and its text."""
    return f"## {title or 'Passage'}\n\n{text}"


@dataclass(frozen=True, kw_only=True)
class LargeCorpus:
    """Documents and decisions of about `doc_chars` characters each, from `passages`.

    Each is a sequence of sections (`section`) drawn with replacement from a pool of `pool`
    passages (a seeded sample of `passages`). A pure function of the passages, the sizes and
    the seed: any document can be built again on its own, so a 200 MB corpus is written in
    batches without being held whole.
    """

    passages: Sequence[tuple[str, str]]
    docs: int
    doc_chars: int = 200_000
    pool: int = POOL
    seed: int = SEED
    _pool: list[int] = field(default_factory=list[int], init=False, repr=False)
    _lengths: list[int] = field(default_factory=list[int], init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.passages:
            raise ValueError("no passages to build documents from")
        if self.pool < 1:
            raise ValueError(f"pool must hold a passage, not {self.pool}")
        size = min(self.pool, len(self.passages))
        rng = np.random.default_rng([self.seed, 4])
        self._pool.extend(rng.choice(len(self.passages), size=size, replace=False).tolist())
        # Each section costs its heading, its text and the blank line before the next one.
        self._lengths.extend(len(section(*self.passages[j])) + 2 for j in self._pool)

    @property
    def pooled(self) -> list[int]:
        """The passages of the pool (indices into `passages`)."""
        return list(self._pool)

    @property
    def repositories(self) -> int:
        """How many `Repository` elements the documents are part of."""
        return min(REPOSITORIES, self.docs)

    @property
    def decisions(self) -> int:
        """How many `Decision`s govern the documents (one per 10 documents, 1 to 10)."""
        return max(1, min(MAX_DECISIONS, self.docs // DOCS_PER_DECISION))

    def _drawn(self, kind: int, i: int) -> list[int]:
        """The pool entries of asset `i` of `kind` (0 document, 1 decision), in order."""
        rng = np.random.default_rng([self.seed, kind, i])
        chosen: list[int] = []
        size = -2  # the length of the text: no blank line after the last section
        while size < self.doc_chars:
            for k in rng.integers(len(self._pool), size=64).tolist():
                chosen.append(k)
                size += self._lengths[k]
                if size >= self.doc_chars:
                    break
        return chosen

    def parts(self, kind: int, i: int) -> list[int]:
        """The passages (indices into `passages`) of asset `i` of `kind` (0 document,
        1 decision), in order."""
        return [self._pool[k] for k in self._drawn(kind, i)]

    def text(self, parts: Sequence[int]) -> str:
        """The sections of `parts`, blank-line separated."""
        return "\n\n".join(section(*self.passages[j]) for j in parts)

    def _name(self, what: str, i: int, parts: Sequence[int]) -> str:
        title = next((self.passages[j][0] for j in parts if self.passages[j][0]), "")
        return f"{what} {i + 1}: {title}"[:200].rstrip(": ")

    def _links(self, i: int) -> tuple[int, int]:
        """(repository, decision) of document `i`."""
        rng = np.random.default_rng([self.seed, 2, i])
        return int(rng.integers(self.repositories)), int(rng.integers(self.decisions))

    def context_elements(self) -> list[Element]:
        """The repositories and the decisions (long texts), with no relation of their own
        but the decisions' `partOf`."""
        out: list[Element] = []
        out += [
            Repository(
                element_id=f"answers:repo:{r}",
                name=f"repository {r + 1}",
                sensitivity=LEVEL,
                timestamp=EPOCH,
            )
            for r in range(self.repositories)
        ]
        for k in range(self.decisions):
            parts = self.parts(1, k)
            out.append(
                Decision(
                    element_id=f"answers:adr:{k}",
                    name=self._name("Decision", k, parts),
                    text=self.text(parts),
                    status=DecisionStatus.ACCEPTED,
                    decided_on=(EPOCH - timedelta(days=30 * (k + 1))).date(),
                    sensitivity=LEVEL,
                    timestamp=EPOCH - timedelta(days=30 * (k + 1)),
                )
            )
        return out

    def context_relations(self) -> list[Relation]:
        """Each decision `partOf` a repository."""
        return [
            Relation(
                source_id=f"answers:adr:{k}",
                relation="partOf",
                target_id=f"answers:repo:{k % self.repositories}",
            )
            for k in range(self.decisions)
        ]

    def documents(self, start: int, stop: int) -> tuple[list[Element], list[Relation]]:
        """Documents `start` to `stop` (excluded) and their `partOf` and `governedBy` edges."""
        elements: list[Element] = []
        relations: list[Relation] = []
        for i in range(start, min(stop, self.docs)):
            parts = self.parts(0, i)
            eid = f"answers:doc:{i}"
            elements.append(
                Document(
                    element_id=eid,
                    name=self._name("Report", i, parts),
                    text=self.text(parts),
                    sensitivity=LEVEL,
                    timestamp=EPOCH - timedelta(hours=i),
                )
            )
            repo, decision = self._links(i)
            relations.append(
                Relation(source_id=eid, relation="partOf", target_id=f"answers:repo:{repo}")
            )
            relations.append(
                Relation(source_id=eid, relation="governedBy", target_id=f"answers:adr:{decision}")
            )
        return elements, relations

    def batches(self, size: int = INGEST_BATCH) -> Iterator[tuple[list[Element], list[Relation]]]:
        """Every document, `size` at a time, with their edges."""
        for start in range(0, self.docs, size):
            yield self.documents(start, start + size)

    def chars(self) -> int:
        """Characters of every document's and decision's text."""
        total = 0
        for kind, count in ((0, self.docs), (1, self.decisions)):
            for i in range(count):
                total += sum(self._lengths[k] for k in self._drawn(kind, i)) - 2
        return total

    def names(self) -> set[str]:
        """The names of every document and decision (what the writer prefixes their chunks
        with)."""
        out = {self._name("Report", i, self.parts(0, i)) for i in range(self.docs)}
        return out | {self._name("Decision", k, self.parts(1, k)) for k in range(self.decisions)}

    def queries(self, n: int) -> list[str]:
        """`n` distinct questions: a sentence (8 to 60 words) of a random passage of a random
        document."""
        rng = np.random.default_rng([self.seed, 3])
        out: list[str] = []
        for _ in range(n * 50):
            if len(out) >= n:
                break
            parts = self.parts(0, int(rng.integers(self.docs)))
            text = self.passages[parts[int(rng.integers(len(parts)))]][1]
            sentences = [
                s
                for s in _SENTENCE.split(text)
                if QUERY_WORDS[0] <= len(s.split()) <= QUERY_WORDS[1]
            ]
            if sentences:
                sentence = sentences[int(rng.integers(len(sentences)))]
                if sentence not in out:
                    out.append(sentence)
        return out

    @cached_property
    def sizes(self) -> dict[str, float]:
        """The corpus's size: documents, decisions, repositories, characters."""
        return {
            "documents": float(self.docs),
            "decisions": float(self.decisions),
            "repositories": float(self.repositories),
            "chars": float(self.chars()),
            "pool": float(len(self._pool)),
        }


class PassageEmbedder:
    """The run's embedder, given each chunk's own text: the writer's name line left off.

    The writer embeds `f"{name}\n{chunk}"`; for the corpus's `names` the name line is
    dropped, so a passage's chunks are one text to the embedder (and its caches) in every
    document. Other texts, and queries, pass unchanged. Counts what it was given.
    """

    def __init__(self, inner: Embedder, names: Iterable[str]) -> None:
        self._inner = inner
        self._names = frozenset(names)
        self._lock = threading.Lock()
        self.given = 0  # texts the writer asked vectors for
        self.stripped = 0  # of them, texts whose name line was left off
        self.distinct: set[str] = set()  # the texts passed on, each once

    @property
    def inner(self) -> Embedder:
        """The embedder underneath."""
        return self._inner

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        return self._inner.dimension

    @property
    def fingerprint(self) -> str:
        """The model's."""
        return self._inner.fingerprint

    def own_text(self, text: str) -> str:
        """`text` without its first line if that line is one of the corpus's names."""
        name, newline, rest = text.partition("\n")
        return rest if newline and name in self._names else text

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        """The inner embedder's vectors of the texts' own text."""
        own = [self.own_text(t) for t in texts]
        with self._lock:
            self.given += len(texts)
            self.stripped += sum(len(a) != len(b) for a, b in zip(own, texts, strict=True))
            self.distinct.update(own)
        return self._inner.embed_documents(own)

    def embed_query(self, text: str) -> Vector:
        """The inner embedder's (cached) query vector."""
        return self._inner.embed_query(text)
