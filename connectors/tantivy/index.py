"""The lexical indexes of one store: a Tantivy index per clearance label, under one folder.

Each index holds the *current* chunks of one label as documents: the chunk's terms from
`connectors.analyzer` (pre-tokenized, so every profile keeps one analyzer, ADR 13), its
row id in the store that owns the chunks (`rid`, the key to score and hydrate it by), and
its element type. Old states stay out: `as_of` reads are the owning store's exact path.

The owner keeps the statistics of a caller's BM25 and scores candidates exactly; the index
only has to find them. `search` asks every visible label's index for its best documents by
Tantivy's BM25 with each term's weight raised to the caller's idf (a boost of
caller idf / label idf), which orders candidates nearly as the exact score will, and lets the
engine skip blocks of postings that cannot reach its top k (block-max WAND).

A write batch ends with `generation` recorded in a marker file: the owner compares it with
its own counter of text writes and does not trust an index that is behind or ahead.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import tantivy

from connectors.tantivy.labels import Label

_LABEL_FILE = "label.json"
_GENERATION_FILE = "generation"
_WRITER_HEAP = 20_000_000  # indexing buffer per label written at once (Tantivy's floor: 15 MB)
_FREQ = "freq"  # postings keep term frequencies (BM25 needs them), not positions


# A chunk's terms reach the engine as one string, each occurrence once, split on spaces by
# Tantivy (`_document`): the analyzer's terms never hold whitespace (connectors.analyzer). A
# pre-tokenized string (one Python `Token` per occurrence) cost twice the engine's whole
# write. The schema names the tokenizer, so an index of the earlier schema is rebuilt.
_TERMS_TOKENIZER = "uda_terms"


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("terms", tokenizer_name=_TERMS_TOKENIZER, index_option=_FREQ)
    builder.add_integer_field("rid", indexed=True, fast=True)
    builder.add_text_field("element_type", tokenizer_name="raw", index_option="basic")
    return builder.build()


SCHEMA = _schema()


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexedChunk:
    """What the index keeps of one current chunk."""

    rid: int
    label: Label
    element_type: str
    terms: Mapping[str, int]


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """A document found by the engine: its row id, and the engine's score (for ordering)."""

    rid: int
    score: float


class _LabelIndex:
    """One label's Tantivy index and the searcher of its last reload."""

    def __init__(self, label: Label, folder: Path) -> None:
        self.label = label
        self.folder = folder
        self.index = tantivy.Index(SCHEMA, path=str(folder), reuse=True)
        self.index.register_tokenizer(
            _TERMS_TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        )
        self.index.config_reader(reload_policy="manual")
        self.searcher = self.index.searcher()

    def reload(self) -> None:
        self.index.reload()
        self.searcher = self.index.searcher()


class LexicalIndexes:
    """Every label's index of one store, under `root`.

    Thread safety: searches may run on any thread at once (Tantivy searchers are shared and
    release the GIL) and never wait for a write; writes are serialised by the owner (its
    write transaction) and by a lock of their own here. `_lock` guards only the map of
    indexes, for moments.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._indexes: dict[Label, _LabelIndex] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> None:
        """Open every label's index found under the root (made if missing).

        An index that cannot be opened with this schema (an earlier release's, or a damaged
        one) deletes them all and the generation marker: the owner, finding the indexes
        behind, rebuilds them from the terms it stores.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with self._lock:
                self._discover()
        except ValueError:  # Tantivy's "schema does not match", or a damaged index
            self.destroy()

    def close(self) -> None:
        """Forget every index (Tantivy releases its files when the objects go)."""
        with self._lock:
            self._indexes = {}

    def _discover(self) -> None:
        for folder in sorted(self.root.iterdir()):
            marker = folder / _LABEL_FILE
            if not marker.is_file():
                continue
            data = json.loads(marker.read_text())
            label = Label(rank=int(data["rank"]), scope=data["scope"])
            if label not in self._indexes:
                self._indexes[label] = _LabelIndex(label, folder)

    def _index_for(self, label: Label) -> _LabelIndex:
        found = self._indexes.get(label)
        if found is not None:
            return found
        folder = self.root / label.folder
        folder.mkdir(parents=True, exist_ok=True)
        made = _LabelIndex(label, folder)
        with self._lock:
            self._indexes[label] = made
        # The label file last: another process discovers the folder by it, and must find an
        # index there, never make a second one beside this process's.
        marker = folder / _LABEL_FILE
        if not marker.exists():
            _write_atomically(marker, json.dumps({"rank": label.rank, "scope": label.scope}))
        return made

    # -- state ----------------------------------------------------------------------------
    @property
    def generation(self) -> int | None:
        """The owner's generation the indexes were last brought to; None when never."""
        try:
            return int((self.root / _GENERATION_FILE).read_text())
        except (OSError, ValueError):
            return None

    def refresh(self) -> None:
        """See the last commits: new labels (another process may have made them) and docs."""
        with self._lock:
            self._discover()
            indexes = list(self._indexes.values())
        for index in indexes:
            index.reload()

    @property
    def labels(self) -> list[Label]:
        """The labels that have an index."""
        return sorted(self._indexes, key=lambda label: label.sort_key)

    def entries(self) -> dict[int, Label]:
        """Every indexed row id with its label (for the drift check; reads every index)."""
        out: dict[int, Label] = {}
        for label, index in list(self._indexes.items()):
            searcher = index.searcher
            total = searcher.num_docs
            if not total:
                continue
            hits = searcher.search(tantivy.Query.all_query(), total, count=False).hits
            rids = searcher.fast_field_values("rid", [address for _, address in hits])
            for rid in rids:
                out[int(rid or 0)] = label
        return out

    # -- writes ---------------------------------------------------------------------------
    def write(
        self,
        removed: Iterable[tuple[Label, int]],
        added: Iterable[IndexedChunk],
        generation: int,
        *,
        clear: bool = False,
    ) -> None:
        """Remove and add documents, commit every touched label, then record `generation`.

        `clear` first empties every index (a rebuild). `added` is read once, as it comes (a
        rebuild streams every current chunk). Idempotent per row id: a row id added again
        replaces its document.
        """
        with self._write_lock:
            removals: dict[Label, set[int]] = {}
            for label, rid in removed:
                removals.setdefault(label, set()).add(rid)
            writers: dict[Label, tantivy.IndexWriter] = {}

            def writer_for(label: Label) -> tantivy.IndexWriter:
                writer = writers.get(label)
                if writer is None:
                    index = self._index_for(label)
                    writer = writers[label] = index.index.writer(_WRITER_HEAP, num_threads=1)
                    if clear:
                        writer.delete_all_documents()
                    for rid in sorted(removals.pop(label, ())):
                        writer.delete_documents_by_term("rid", rid)
                return writer

            for label in self.labels if clear else ():
                writer_for(label)
            for label in [label for label in removals if label in self._indexes]:
                writer_for(label)  # nothing to remove from an index that does not exist
            for chunk in added:
                writer = writer_for(chunk.label)
                if not clear:
                    writer.delete_documents_by_term("rid", chunk.rid)
                writer.add_document(_document(chunk))
            for label in sorted(writers, key=lambda x: x.sort_key):
                writers[label].commit()
                # Merges finish before the writer goes (a writer dropped mid-merge abandons
                # them, and small segments pile up); searchers reload lazily (`refresh`).
                writers[label].wait_merging_threads()
            _write_atomically(self.root / _GENERATION_FILE, str(generation))

    def invalidate(self) -> None:
        """Forget the recorded generation: the owner will not trust the indexes until rebuilt."""
        (self.root / _GENERATION_FILE).unlink(missing_ok=True)

    def destroy(self) -> None:
        """Delete every index and the marker (the folder stays)."""
        with self._write_lock, self._lock:
            self._indexes = {}
            for folder in self.root.iterdir():
                if folder.is_dir():
                    shutil.rmtree(folder)
            (self.root / _GENERATION_FILE).unlink(missing_ok=True)

    # -- reads ----------------------------------------------------------------------------
    def search(
        self,
        labels: Sequence[Label],
        weights: Mapping[str, float],
        element_types: Sequence[str] | None,
        k: int,
    ) -> list[Candidate]:
        """The `k` best candidates over these labels for terms weighted by the caller's idf.

        Each label's index scores by its own BM25 with every term boosted from the label's
        idf to `weights[term]`, so that scores of different labels are comparable; the best
        `k` of their union are kept, ties by label and then by the engine's order.
        """
        if k <= 0 or not weights:
            return []
        found: list[tuple[float, int, int, int]] = []
        for order, label in enumerate(labels):
            index = self._indexes.get(label)
            if index is None:
                continue
            searcher = index.searcher
            query = _query(searcher, weights, element_types)
            if query is None:
                continue
            hits = searcher.search(query, k, count=False).hits
            if not hits:
                continue
            rids = searcher.fast_field_values("rid", [address for _, address in hits])
            found += [
                (-float(score), order, position, int(rid or 0))
                for position, ((score, _), rid) in enumerate(zip(hits, rids, strict=True))
            ]
        found.sort()
        return [Candidate(rid=rid, score=-negative) for negative, _, _, rid in found[:k]]


def _query(
    searcher: tantivy.Searcher, weights: Mapping[str, float], element_types: Sequence[str] | None
) -> tantivy.Query | None:
    n_docs = searcher.num_docs
    clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
    for term, weight in weights.items():
        df = searcher.doc_freq("terms", term)
        if not df or weight <= 0:
            continue
        # Tantivy's idf; its N counts deleted documents too, so this only nearly cancels it:
        # the boost orders candidates, it never becomes a score.
        idf = math.log(1 + (max(n_docs, df) - df + 0.5) / (df + 0.5))
        term_query = tantivy.Query.term_query(SCHEMA, "terms", term, index_option=_FREQ)
        clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(term_query, weight / idf)))
    if not clauses:
        return None
    query = tantivy.Query.boolean_query(clauses)
    if element_types is None:
        return query
    types = tantivy.Query.const_score_query(
        tantivy.Query.term_set_query(SCHEMA, "element_type", list(element_types)), 0.0
    )
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, query), (tantivy.Occur.Must, types)])


def _document(chunk: IndexedChunk) -> tantivy.Document:
    document = tantivy.Document()
    document.add_integer("rid", chunk.rid)
    document.add_text("element_type", chunk.element_type)
    # Each occurrence followed by a space, repeated by `str`'s `*` (the whitespace tokenizer
    # ignores the last one): a third of the time of joining one string per occurrence.
    document.add_text("terms", "".join([f"{term} " * count for term, count in chunk.terms.items()]))
    return document


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
