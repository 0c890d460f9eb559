"""A seeded synthetic ontology, with vectors generated directly, for speed and scale runs.

Proportions (per asset, roughly those of a documentation estate): every 12th knowledge asset
is a `Decision` (one chunk), the others `Document`s of 1-5 chunks (mean 3); one
`Repository` per 250 assets, one `Person` per 25, one `SystemComponent` per 100. Edges:
each document is `partOf` a repository and `authoredBy` 1-2 people, 40 % are `governedBy` an
earlier decision, 30 % `relatedTo` an earlier asset; each decision is `partOf` a component,
`authoredBy` a person, and 10 % `supersedes` an earlier decision. Clearance mix: 50 %
public, 25 % internal, 15 % confidential, 10 % restricted; 20 % of assets are scoped to one
of 8 projects. Timestamps spread over three years, so decay matters.

Vectors are clustered unit vectors: a cluster centre, plus an asset offset, plus a chunk
offset. Chunk texts mix the cluster's topic words with Zipf-distributed background words,
so the lexical leg has signal too; a query names its cluster's topic words and its vector is
drawn around the same centre. `SyntheticEmbedder` is the test double that serves these
vectors to UDA, so ingest and queries bypass the model and scale is not bounded by it.

Everything is a pure function of the seed and the batch number: a corpus can be generated
again in batches (for the 1M-chunk run) without holding its elements in memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ontology import (
    Decision,
    Document,
    Element,
    Person,
    Relation,
    Repository,
    SystemComponent,
)

DECISION_EVERY = 12
MAX_PARTS = 5
PROJECTS = tuple(f"project:p{i}" for i in range(8))
LEVELS = ("public", "internal", "confidential", "restricted")
LEVEL_SHARES = (0.50, 0.25, 0.15, 0.10)
SCOPED_SHARE = 0.20
WORDS_PER_CHUNK = 40
TOPIC_WORDS = 25
VOCABULARY = 5000
EPOCH = datetime(2025, 6, 1, tzinfo=UTC)
STATUSES = ("accepted", "proposed", "superseded", "deprecated")
_SYLLABLES = tuple(
    c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ei")
)
_ASSET = re.compile(r"^A(\d{7}) ")
_PART = re.compile(r"## Part (\d+)")
_QUERY = re.compile(r"^Q(\d{6}) ")


def _unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


@dataclass(frozen=True, kw_only=True)
class SyntheticSpec:
    """What to generate: size in chunks, seed, dimension, and the vector spreads."""

    chunks: int
    seed: int = 7
    dim: int = 384
    batch_assets: int = 1000
    queries: int = 200
    asset_spread: float = 0.7  # norm of an asset's offset from its cluster centre
    chunk_spread: float = 0.35  # norm of a chunk's offset from its asset
    query_spread: float = 0.8


@dataclass(frozen=True, kw_only=True)
class SyntheticBatch:
    """One batch of assets with the relations that start at them."""

    index: int
    elements: list[Element]
    relations: list[Relation]


@dataclass(kw_only=True)
class SyntheticCorpus:
    """The generated corpus; per-asset facts as arrays, elements produced batch by batch."""

    spec: SyntheticSpec
    parts: npt.NDArray[np.int64] = field(init=False)
    first_row: npt.NDArray[np.int64] = field(init=False)
    cluster: npt.NDArray[np.int64] = field(init=False)
    rank: npt.NDArray[np.int8] = field(init=False)
    scope: npt.NDArray[np.int8] = field(init=False)  # -1: none, else index into PROJECTS
    age_days: npt.NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        spec = self.spec
        rng = np.random.default_rng([spec.seed, 0])
        estimate = spec.chunks  # an upper bound on the number of assets
        parts = rng.integers(1, MAX_PARTS + 1, size=estimate)
        parts[::DECISION_EVERY] = 1
        total = np.cumsum(parts)
        n_assets = int(np.searchsorted(total, spec.chunks) + 1)
        parts = parts[:n_assets].copy()
        parts[-1] -= int(total[n_assets - 1] - spec.chunks)  # the last asset fills up exactly
        self.parts = parts
        self.first_row = np.concatenate([[0], np.cumsum(parts)[:-1]]).astype(np.int64)
        self.n_clusters = max(8, int(np.sqrt(n_assets)))
        self.cluster = rng.integers(0, self.n_clusters, size=n_assets)
        self.rank = rng.choice(len(LEVELS), size=n_assets, p=LEVEL_SHARES).astype(np.int8)
        scoped = rng.random(n_assets) < SCOPED_SHARE
        self.scope = np.where(scoped, rng.integers(0, len(PROJECTS), n_assets), -1).astype(np.int8)
        self.age_days = rng.uniform(0, 3 * 365, size=n_assets)
        self.repositories = max(2, n_assets // 250)
        self.people = max(5, n_assets // 25)
        self.components = max(2, n_assets // 100)
        words = np.random.default_rng([spec.seed, 3])
        self.vocabulary = [
            "".join(words.choice(_SYLLABLES, size=int(words.integers(2, 4))))
            for _ in range(VOCABULARY)
        ]
        self.topic_words = words.integers(200, VOCABULARY, size=(self.n_clusters, TOPIC_WORDS))
        zipf = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.1
        self.background = zipf / zipf.sum()

    # -- sizes ------------------------------------------------------------------------
    @property
    def n_assets(self) -> int:
        """Knowledge assets (documents and decisions)."""
        return len(self.parts)

    @property
    def n_chunks(self) -> int:
        """Chunks over all assets (equals `spec.chunks`)."""
        return int(self.parts.sum())

    @property
    def n_batches(self) -> int:
        """How many batches `batches()` yields."""
        return -(-self.n_assets // self.spec.batch_assets)

    # -- vectors ----------------------------------------------------------------------
    @cached_property
    def centres(self) -> npt.NDArray[np.float32]:
        """One unit vector per cluster."""
        rng = np.random.default_rng([self.spec.seed, 1])
        return _unit(rng.normal(size=(self.n_clusters, self.spec.dim)))

    @cached_property
    def vectors(self) -> npt.NDArray[np.float32]:
        """Every chunk's unit vector, row = `first_row[asset] + part - 1`."""
        spec = self.spec
        owner = self.owner
        out = np.empty((self.n_chunks, spec.dim), dtype=np.float32)
        scale = 1.0 / np.sqrt(spec.dim)
        block = 50_000
        for start in range(0, self.n_assets, block):
            stop = min(start + block, self.n_assets)
            rng = np.random.default_rng([spec.seed, 2, start])
            offsets = rng.normal(size=(stop - start, spec.dim)) * scale * spec.asset_spread
            base = self.centres[self.cluster[start:stop]] + offsets
            rows = slice(
                int(self.first_row[start]), int(self.first_row[stop - 1] + self.parts[stop - 1])
            )
            local = owner[rows] - start
            noise = rng.normal(size=(len(local), spec.dim)) * scale * spec.chunk_spread
            out[rows] = _unit(base[local] + noise)
        return out

    @cached_property
    def owner(self) -> npt.NDArray[np.int64]:
        """The asset of every chunk row."""
        return np.repeat(np.arange(self.n_assets, dtype=np.int64), self.parts)

    @cached_property
    def query_clusters(self) -> npt.NDArray[np.int64]:
        """The cluster each query asks about (that of a random asset)."""
        rng = np.random.default_rng([self.spec.seed, 4])
        return self.cluster[rng.integers(0, self.n_assets, size=self.spec.queries)]

    @cached_property
    def query_vectors(self) -> npt.NDArray[np.float32]:
        """One unit vector per query, around its cluster's centre."""
        spec = self.spec
        rng = np.random.default_rng([spec.seed, 5])
        noise = rng.normal(size=(spec.queries, spec.dim)) / np.sqrt(spec.dim)
        return _unit(self.centres[self.query_clusters] + noise * spec.query_spread)

    @cached_property
    def queries(self) -> list[str]:
        """Query texts: a marker the embedder double reads, then topic words."""
        rng = np.random.default_rng([self.spec.seed, 6])
        out: list[str] = []
        for j, c in enumerate(self.query_clusters):
            words = [self.vocabulary[w] for w in rng.choice(self.topic_words[c], 4, replace=False)]
            out.append(f"Q{j:06d} " + " ".join(words))
        return out

    # -- ids and facts ----------------------------------------------------------------
    def asset_id(self, i: int) -> str:
        """Element id of asset i (decisions `r…`, documents `d…`)."""
        return f"r{i}" if i % DECISION_EVERY == 0 else f"d{i}"

    def asset_ids(self) -> list[str]:
        """Element ids of every asset, in order."""
        return [self.asset_id(i) for i in range(self.n_assets)]

    def scope_of(self, i: int) -> str | None:
        """Project scope of asset i, or None."""
        s = int(self.scope[i])
        return None if s < 0 else PROJECTS[s]

    def timestamp(self, i: int) -> datetime:
        """Asset i's timestamp (fixed epoch minus its age)."""
        return EPOCH - timedelta(days=float(self.age_days[i]))

    def context_nodes(self) -> list[Element]:
        """Repositories, people and components (ingest them before any batch)."""
        rng = np.random.default_rng([self.spec.seed, 7])
        nodes: list[Element] = [
            Repository(element_id=f"repo{i}", name=f"repository {i}", sensitivity="public")
            for i in range(self.repositories)
        ]
        nodes += [
            Person(
                element_id=f"person{i}",
                name=f"person {i}",
                sensitivity="public" if rng.random() < 0.8 else "internal",
            )
            for i in range(self.people)
        ]
        nodes += [
            SystemComponent(element_id=f"comp{i}", name=f"component {i}", sensitivity="public")
            for i in range(self.components)
        ]
        return nodes

    def context_clearance(self) -> dict[str, tuple[int, str | None]]:
        """Sensitivity rank and scope of every context node."""
        return {
            n.element_id: (LEVELS.index(n.sensitivity.value), n.scope) for n in self.context_nodes()
        }

    def _words(self, rng: np.random.Generator, cluster: int) -> str:
        topic = rng.choice(self.topic_words[cluster], 12)
        background = rng.choice(VOCABULARY, WORDS_PER_CHUNK - 12, p=self.background)
        chosen = np.concatenate([topic, background])
        rng.shuffle(chosen)
        return " ".join(self.vocabulary[w] for w in chosen)

    def name(self, i: int, rng: np.random.Generator) -> str:
        """Asset i's name: the marker the embedder double reads, then two topic words."""
        words = rng.choice(self.topic_words[self.cluster[i]], 2, replace=False)
        return f"A{i:07d} " + " ".join(self.vocabulary[w] for w in words)

    def batch(self, b: int) -> SyntheticBatch:
        """Assets of batch b, with the relations from them (to earlier assets only)."""
        size = self.spec.batch_assets
        rng = np.random.default_rng([self.spec.seed, 8, b])
        elements: list[Element] = []
        relations: list[Relation] = []
        for i in range(b * size, min((b + 1) * size, self.n_assets)):
            cluster = int(self.cluster[i])
            name = self.name(i, rng)
            text = "\n\n".join(
                f"## Part {k}\n\n{self._words(rng, cluster)}"
                for k in range(1, int(self.parts[i]) + 1)
            )
            common = {
                "element_id": self.asset_id(i),
                "name": name,
                "text": text,
                "sensitivity": LEVELS[int(self.rank[i])],
                "scope": self.scope_of(i),
                "timestamp": self.timestamp(i),
            }
            eid = self.asset_id(i)
            earlier_decisions = (i - 1) // DECISION_EVERY + 1 if i > 0 else 0
            if i % DECISION_EVERY == 0:
                elements.append(Decision(status=STATUSES[int(rng.integers(0, 4))], **common))
                relations.append(self._rel(eid, "partOf", f"comp{rng.integers(self.components)}"))
                relations.append(self._rel(eid, "authoredBy", f"person{rng.integers(self.people)}"))
                if earlier_decisions and rng.random() < 0.10:
                    j = DECISION_EVERY * int(rng.integers(earlier_decisions))
                    relations.append(self._rel(eid, "supersedes", self.asset_id(j)))
            else:
                elements.append(Document(**common))
                relations.append(self._rel(eid, "partOf", f"repo{rng.integers(self.repositories)}"))
                for person in set(rng.integers(self.people, size=int(rng.integers(1, 3)))):
                    relations.append(self._rel(eid, "authoredBy", f"person{person}"))
                if earlier_decisions and rng.random() < 0.40:
                    j = DECISION_EVERY * int(rng.integers(earlier_decisions))
                    relations.append(self._rel(eid, "governedBy", self.asset_id(j)))
                if i > 0 and rng.random() < 0.30:
                    relations.append(
                        self._rel(eid, "relatedTo", self.asset_id(int(rng.integers(i))))
                    )
        return SyntheticBatch(index=b, elements=elements, relations=relations)

    @staticmethod
    def _rel(source: str, relation: str, target: str) -> Relation:
        return Relation(source_id=source, relation=relation, target_id=target)

    def batches(self) -> Iterator[SyntheticBatch]:
        """Every batch, in order (the same each time)."""
        for b in range(self.n_batches):
            yield self.batch(b)

    def chunk_texts(self) -> Iterator[tuple[int, str]]:
        """(asset, 'name\\npart') per chunk, in row order: what UDA embeds and indexes."""
        for b in range(self.n_batches):
            for element in self.batch(b).elements:
                i = int(_ASSET.match(element.name).group(1))  # type: ignore[union-attr]
                text: str = element.text  # type: ignore[attr-defined]
                for part in text.split("\n\n## "):
                    piece = part if part.startswith("## ") else "## " + part
                    yield i, f"{element.name}\n{piece}"


class SyntheticEmbedder:
    """Test double of `uda.embedding.Embedder`: the generator's precomputed vectors, no model.

    Texts are recognised by the markers the generator writes (`A0000123 ...` names with
    `## Part k` chunks, `Q000123 ...` queries); any other text is an error, never a guess.
    With `charge_queries` on and a real model given, each query is also run through that
    model, uncached, and the result thrown away: the cost of a real query embedding, for
    the rows that include it.
    """

    def __init__(self, corpus: SyntheticCorpus, charge: object | None = None) -> None:
        self._corpus = corpus
        self._charge = charge
        self.charge_queries = False

    @property
    def dimension(self) -> int:
        """The generator's dimension."""
        return self._corpus.spec.dim

    @property
    def fingerprint(self) -> str:
        """Names the generator's vectors: no store mixes them with a model's."""
        return f"synthetic-{self._corpus.spec.dim}d"

    def row_of(self, text: str) -> int:
        """The vector row of a chunk text the generator made."""
        asset = _ASSET.match(text)
        part = _PART.search(text)
        if asset is None or part is None:
            raise KeyError(f"not a chunk text of the synthetic generator: {text[:60]!r}")
        i = int(asset.group(1))
        return int(self._corpus.first_row[i]) + int(part.group(1)) - 1

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Rows of the precomputed vectors."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._corpus.vectors[[self.row_of(t) for t in texts]]

    def query_row(self, text: str) -> int:
        """The query number of a query text the generator made."""
        match = _QUERY.match(text)
        if match is None:
            raise KeyError(f"not a query of the synthetic generator: {text[:60]!r}")
        return int(match.group(1))

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The precomputed query vector (after a real, discarded embedding if charging)."""
        if self.charge_queries and self._charge is not None:
            self._charge.embed_documents([text])  # type: ignore[attr-defined]
        return self._corpus.query_vectors[self.query_row(text)]

    def transform(self) -> object:
        """A plain function for txtai's `external` vectors: texts -> vectors."""

        def transform(texts: Sequence[str]) -> npt.NDArray[np.float32]:
            rows: list[npt.NDArray[np.float32]] = []
            for text in texts:
                if _QUERY.match(text):
                    rows.append(self.embed_query(text))
                else:
                    rows.append(self._corpus.vectors[self.row_of(text)])
            return np.stack(rows)

        return transform
