"""The answers suite's pure parts: its corpus of large documents, its questions, what it
measures of an answer, and how its target is judged (benchmarks/suites/answers.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from benchmarks.large_corpus import LargeCorpus, PassageEmbedder, read_passages, section
from benchmarks.suites import answers
from benchmarks.suites.answers import arrow_bytes, longest_string
from benchmarks.targets import ANSWERS_DEFAULT, ANSWERS_WHOLE, evaluate_targets
from ontology import Decision, Document, Element, KnowledgeAsset, Repository
from uda.write.chunking import chunk_text


def _passages(n: int = 40) -> list[tuple[str, str]]:
    return [
        (
            f"Title {i}",
            f"Passage {i} opens with a sentence of exactly ten words in it. "
            f"Then passage {i} says something short. Then it ends with one more sentence.",
        )
        for i in range(n)
    ]


def test_large_corpus_is_deterministic_and_sized() -> None:
    one = LargeCorpus(passages=_passages(), docs=25, doc_chars=3_000, seed=5)
    two = LargeCorpus(passages=_passages(), docs=25, doc_chars=3_000, seed=5)
    assert one.documents(0, 25) == two.documents(0, 25)
    assert one.context_elements() == two.context_elements()
    assert one.queries(6) == two.queries(6)
    assert one.documents(0, 25) != LargeCorpus(
        passages=_passages(), docs=25, doc_chars=3_000, seed=6
    ).documents(0, 25)
    docs, edges = one.documents(0, 25)
    assert [type(d) for d in docs] == [Document] * 25
    for doc in docs:
        assert isinstance(doc, KnowledgeAsset)
        # At least the size asked for, and no more than one passage over it.
        assert 3_000 <= len(doc.text) < 3_000 + 200
    context = one.context_elements()
    repos = {e.element_id for e in context if isinstance(e, Repository)}
    decisions = [e for e in context if isinstance(e, Decision)]
    assert (len(repos), len(decisions)) == (one.repositories, one.decisions) == (10, 2)
    assert all(len(d.text) >= 3_000 for d in decisions)
    # Every document is part of one repository and governed by one decision.
    for doc in docs:
        mine = [e for e in edges if e.source_id == doc.element_id]
        assert sorted(e.relation for e in mine) == ["governedBy", "partOf"]
        assert {e.target_id for e in mine} <= repos | {d.element_id for d in decisions}
    assert {e.target_id for e in one.context_relations()} <= repos
    # Batches give the same documents as one call.
    batched = [d for elements, _ in one.batches(size=7) for d in elements]
    assert batched == docs
    assert one.sizes["chars"] == sum(len(d.text) for d in [*docs, *decisions])


def _long_passages(n: int = 30) -> list[tuple[str, str]]:
    """Passages of which every third is long enough for the chunker to split (about 400
    tokens)."""
    out: list[tuple[str, str]] = []
    for i in range(n):
        words = 300 if i % 3 == 0 else 40
        sentences = [f"Sentence {k} of passage {i} has six words." for k in range(words // 6)]
        out.append((f"Title {i}", " ".join(sentences)))
    return out


def _texts(elements: Sequence[Element]) -> list[str]:
    return [e.text for e in elements if isinstance(e, KnowledgeAsset)]


def test_documents_are_sections_of_a_pool_chunked_alike_in_every_document() -> None:
    passages = _long_passages()
    corpus = LargeCorpus(passages=passages, docs=20, doc_chars=20_000, pool=12, seed=3)
    assert len(corpus.pooled) == len(set(corpus.pooled)) == 12
    texts = _texts(corpus.documents(0, 20)[0])
    assert len(set(texts)) == 20  # documents differ
    for i, text in enumerate(texts):
        parts = corpus.parts(0, i)
        assert set(parts) <= set(corpus.pooled)
        assert text == "\n\n".join(section(*passages[j]) for j in parts)
    # A heading starts a chunk: a passage's chunks are those of the passage alone, whatever
    # its neighbours, so the distinct chunks are those of the pool.
    alone = {c for j in corpus.pooled for c in chunk_text(section(*passages[j]))}
    chunks = [c for text in texts for c in chunk_text(text)]
    assert set(chunks) == alone
    assert len(chunks) > 10 * len(alone)
    # The pool is never larger than the passages, and a heading stands for a missing title.
    small = LargeCorpus(passages=[("", "Only text.")], docs=2, doc_chars=100, pool=5)
    assert small.pooled == [0]
    assert _texts(small.documents(0, 1)[0])[0].startswith("## Passage\n\nOnly text.")


class _Recorder:
    dimension = 3
    fingerprint = "model"

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.queries: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return np.ones((len(texts), 3), dtype=np.float32)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.queries.append(text)
        return np.ones(3, dtype=np.float32)


def test_passage_embedder_leaves_the_name_line_of_the_corpus_off() -> None:
    corpus = LargeCorpus(passages=_passages(), docs=3, doc_chars=500)
    docs, _ = corpus.documents(0, 3)
    names = corpus.names()
    assets = [d for d in [*docs, *corpus.context_elements()] if isinstance(d, KnowledgeAsset)]
    assert names == {d.name for d in assets}
    assert len(names) == len(assets)  # every asset has a name of its own
    inner = _Recorder()
    embedder = PassageEmbedder(inner, names)
    assert (embedder.dimension, embedder.fingerprint, embedder.inner) == (3, "model", inner)
    first, second = sorted(names)[:2]
    texts = [f"{first}\n## T\n\nchunk", f"{second}\n## T\n\nchunk", "Other\nchunk", "plain"]
    assert embedder.embed_documents(texts).shape == (4, 3)
    assert inner.texts == ["## T\n\nchunk", "## T\n\nchunk", "Other\nchunk", "plain"]
    assert (embedder.given, embedder.stripped, len(embedder.distinct)) == (4, 2, 3)
    embedder.embed_query(f"{first}\nquery")
    assert inner.queries == [f"{first}\nquery"]


def test_questions_are_distinct_sentences_of_the_documents() -> None:
    corpus = LargeCorpus(passages=_passages(), docs=8, doc_chars=2_000)
    questions = corpus.queries(5)
    assert len(questions) == len(set(questions)) == 5
    texts = " ".join(d.text for d in corpus.documents(0, 8)[0])  # type: ignore[attr-defined]
    for question in questions:
        assert question in texts
        assert 8 <= len(question.split()) <= 60


def test_decisions_scale_with_documents() -> None:
    small = LargeCorpus(passages=_passages(), docs=3, doc_chars=500)
    big = LargeCorpus(passages=_passages(), docs=1000, doc_chars=500)
    assert (small.repositories, small.decisions) == (3, 1)
    assert (big.repositories, big.decisions) == (10, 10)


def test_passages_are_read_in_place_once_each(tmp_path: Path) -> None:
    rows = [{"_id": "1", "title": "A", "text": "Same  text."}, {"_id": "2", "text": "Other."}]
    for folder in ("scifact", "multihop/hipporag_musique"):
        (tmp_path / folder).mkdir(parents=True)
        lines = "\n".join(json.dumps(r) for r in rows) + "\n\n"
        (tmp_path / folder / "corpus.jsonl").write_text(lines, encoding="utf-8")
    assert read_passages(tmp_path) == [("A", "Same text."), ("", "Other.")]
    assert read_passages(tmp_path / "nothing here") == []


class _Response:
    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def to_batches(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self._table.schema, self._table.to_batches())


def test_answer_measures() -> None:
    table = pa.table({"text": ["x" * 5000, "y"]})
    size = arrow_bytes(_Response(table))
    assert 5000 < size < 6000
    assert longest_string([{"a": "abc", "b": [{"c": "x" * 7}]}, 3, None]) == 7
    assert answers.DEFAULT == ANSWERS_DEFAULT
    assert answers.WHOLE == ANSWERS_WHOLE


def _row(method: str, docs: int, **metrics: float) -> dict[str, Any]:
    return {
        "suite": "answers",
        "dataset": "large documents",
        "system": "uda",
        "method": method,
        "profile": "embedded",
        "metrics": metrics,
        "params": {"docs": docs, "doc_chars": 200_000, "limit": 10},
    }


def test_answer_targets_are_judged_at_the_full_corpus() -> None:
    def targets(docs: int, json_max: float) -> dict[str, Any]:
        rows = [
            _row(ANSWERS_DEFAULT, docs, answer_bytes_json_max=json_max),
            _row(ANSWERS_WHOLE, docs, answer_bytes_json_max=4e6),
        ]
        return {t.id: t for t in evaluate_targets({"answers": {"rows": rows}}, "full")}

    small = targets(100, 50_000.0)
    shown = small["answers_default_json_bytes_embedded"]
    assert shown.met is None
    assert shown.figure == 50_000.0
    assert "judged at 1,000 documents" in shown.detail
    assert "whole elements: 4,000,000 bytes" in shown.detail
    # A figure the row lacks is not measured, never assumed.
    assert small["answers_default_http_bytes_embedded"].met is None
    assert small["answers_default_http_bytes_embedded"].figure is None
    assert targets(1000, 65_536.0)["answers_default_json_bytes_embedded"].met is True
    assert targets(1000, 65_537.0)["answers_default_json_bytes_embedded"].met is False
    assert not any(t.startswith("answers_whole") for t in targets(1000, 1.0))
