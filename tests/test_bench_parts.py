"""The harness's pure parts: graphs from data, the synthetic generator and its embedder
double, KEP references, the numpy floor, and how the report derives ratios and targets."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.baselines.floor import FlatCorpus, NumpyFloor
from benchmarks.datasets import BeirSet, normalise_entity, subset, title_mention_graph
from benchmarks.embedding import CachingEmbedder, VectorCache, model_fingerprint
from benchmarks.kep_questions import Answer, KepQuery, evaluate, kep_queries
from benchmarks.keps import Kep, clearance_of, kep_elements, resolve_refs
from benchmarks.synonyms import synonym_groups
from benchmarks.synthetic import SyntheticCorpus, SyntheticEmbedder, SyntheticSpec
from benchmarks.targets import derive_ratios, evaluate_targets
from uda.query.clearance import Clearance
from uda.write.chunking import chunk_text


def test_title_mentions_link_whole_words_case_sensitively() -> None:
    corpus = {
        "1": ("Rush", "Rush is a Canadian rock band."),
        "2": ("Neil Peart", "Neil Peart was the drummer of Rush."),
        "3": ("Brush", "A brush is a tool; the rush hour is busy."),
        "4": ("Toto", "Toto is a band."),
    }
    graph = title_mention_graph(corpus)
    # "Rush" (4 chars) is mentioned by 2 but not by 3 ("Brush", "rush"); "Toto" nowhere.
    assert graph.passage_passage == (("2", "1"),)


def test_entity_names_are_normalised() -> None:
    assert normalise_entity("The Beatles") == "beatles"
    assert normalise_entity("  Beyoncé, ") == "beyonce"
    assert normalise_entity("New   York City") == "new york city"


def test_synonym_groups_join_near_names_transitively() -> None:
    """Names at cosine >= the threshold share a group, through chains; others stay apart."""
    angle = {"HBU": 0.0, "Houston Baptist University": 0.3, "Houston Baptist Univ.": 0.6}
    angle |= {"Rice University": 1.5, "Texas": 3.0}

    def embed(names: Sequence[str]) -> np.ndarray:
        return np.asarray([[np.cos(angle[n]), np.sin(angle[n])] for n in names])

    names = list(angle)
    # cos(0.3) = 0.955: neighbours join; HBU and 'Univ.' (cos 0.6 = 0.825) only through the chain.
    assert synonym_groups(names, embed, 0.9) == [0, 0, 0, 3, 4]
    assert synonym_groups(names, embed, 0.99) == [0, 1, 2, 3, 4]
    assert synonym_groups([], embed, 0.9) == []


def test_subset_keeps_relevant_documents_and_is_seeded() -> None:
    data = BeirSet(
        name="t",
        corpus={str(i): (f"t{i}", f"text {i}") for i in range(50)},
        queries={"q1": "x", "q2": "y", "q3": "z"},
        qrels={"q1": {"3": 1}, "q2": {"40": 1}, "q3": {"7": 1}},
    )
    small = subset(data, queries=2, docs=10, seed=1)
    assert list(small.qrels) == ["q1", "q2"]
    assert {"3", "40"} <= set(small.corpus)
    assert len(small.corpus) == 10
    assert small.corpus == subset(data, queries=2, docs=10, seed=1).corpus


def test_synthetic_corpus_is_deterministic_and_sized_in_chunks() -> None:
    spec = SyntheticSpec(chunks=700, queries=5, batch_assets=100)
    one, two = SyntheticCorpus(spec=spec), SyntheticCorpus(spec=spec)
    assert one.n_chunks == 700
    assert np.array_equal(one.vectors, two.vectors)
    assert one.batch(1).elements == two.batch(1).elements
    assert np.allclose(np.linalg.norm(one.vectors, axis=1), 1.0, atol=1e-5)
    levels = {e.sensitivity.value for b in one.batches() for e in b.elements}
    assert levels == {"public", "internal", "confidential", "restricted"}


def test_embedder_double_serves_the_chunks_uda_makes() -> None:
    corpus = SyntheticCorpus(spec=SyntheticSpec(chunks=300, queries=3, batch_assets=50))
    double = SyntheticEmbedder(corpus)
    rows: list[int] = []
    for batch in corpus.batches():
        for element in batch.elements:
            # The write path embeds "name\nchunk" for each chunk of the text.
            texts = [f"{element.name}\n{c}" for c in chunk_text(element.text)]  # type: ignore[attr-defined]
            rows += [double.row_of(t) for t in texts]
    assert rows == list(range(corpus.n_chunks))
    assert [t for _, t in corpus.chunk_texts()][5] == next(
        f"{e.name}\n{c}"
        for e in corpus.batch(0).elements
        for c in chunk_text(e.text)  # type: ignore[attr-defined]
        if double.row_of(f"{e.name}\n{c}") == 5
    )
    assert np.array_equal(double.embed_query(corpus.queries[2]), corpus.query_vectors[2])
    with pytest.raises(KeyError):
        double.embed_documents(["some text the generator never made"])


def _kep(path: str, number: int) -> Kep:
    return Kep(
        path=path,
        number=number,
        title=path,
        sig=path.split("/")[0],
        status="implemented",
        stage=None,
        created=date(2020, 1, 1),
        updated=None,
        authors=(),
        see_also=(),
        replaces=(),
        summary="",
        readme="",
        sensitivity="public",
        scope=None,
    )


def test_kep_references_resolve_by_path_then_unique_number() -> None:
    keps = [
        _kep("sig-node/2133-kubelet-credential-providers", 2133),
        _kep("sig-cloud-provider/2133-out-of-tree-credential-provider", 2133),
        _kep("sig-apps/1847-autoremove-statefulset-pvcs", 1847),
    ]
    refs = [
        "/keps/sig-node/2133-kubelet-credential-providers",
        "keps/sig-apps/1847-old-name/",  # renamed folder: the unique number finds it
        "https://github.com/kubernetes/enhancements/tree/master/keps/sig-x/2133-gone",
        "https://github.com/kubernetes/design-proposals-archive/blob/master/x.md",
        "n/a",
    ]
    assert resolve_refs(refs, keps) == [
        "sig-node/2133-kubelet-credential-providers",
        "sig-apps/1847-autoremove-statefulset-pvcs",
    ]
    assert clearance_of("sig-node/1-x", "sig-node") == clearance_of("sig-node/1-x", "sig-node")


def test_kep_exact_title_and_identifier_questions() -> None:
    keps = [
        replace(_kep("sig-a/1001-one", 1001), title="Same  title", readme="# KEP-1001: one"),
        replace(_kep("sig-a/1002-two", 1002), title="same TITLE", readme="Builds on kep-1001."),
        replace(_kep("sig-b/1003-three", 1003), readme="# KEP-1003\n\nAlso KEP-1003-x."),
        replace(_kep("sig-b/1004-four", 1004), readme="No token of its own; KEP-10045."),
        replace(_kep("sig-c/19-short", 19), readme="# KEP-19: too short for an identifier"),
    ]
    elements, _ = kep_elements(keps)
    queries = kep_queries(keps, elements=elements)
    titles = {q.text: q.answers for q in queries if q.kind == "exact_title"}
    assert (
        titles["Same  title"]
        == titles["same TITLE"]
        == {"kep:sig-a/1001-one", "kep:sig-a/1002-two"}
    )
    assert titles["sig-b/1003-three"] == {"kep:sig-b/1003-three"}
    # KEP-1001 occurs in another proposal's text too, 1002 and 1004 in none of their own,
    # and KEP-19 is not an identifier (uda.query.exact.is_identifier).
    identifiers = [(q.text, q.answers) for q in queries if q.kind == "identifier"]
    assert identifiers == [("KEP-1003", frozenset({"kep:sig-b/1003-three"}))]
    assert not [q for q in kep_queries(keps) if q.kind == "identifier"]

    def ask(q: KepQuery, caller: tuple[str, ...]) -> Answer:
        # Always the second proposal first, then the right one.
        return Answer(ids=["kep:sig-a/1002-two", *sorted(q.answers)])

    figures = evaluate(queries, keps, ask, callers=[("public",)])
    assert figures["exact_title"]["recall@1"] == 0.4  # right for the two "same title" ones
    assert figures["identifier"]["recall@1"] == 0.0
    assert figures["identifier"]["mrr"] == 0.5
    assert "recall@1" in figures["lookup"]


def test_exact_match_targets() -> None:
    rows = [
        {
            "suite": "keps",
            "dataset": "keps",
            "system": "uda",
            "method": method,
            "profile": "embedded",
            "metrics": {"recall@1": value, "questions": 40.0},
        }
        for method, value in (("exact_title", 0.99), ("identifier", 0.975), ("lookup", 0.5))
    ]
    targets = {t.id: t for t in evaluate_targets({"keps": {"rows": rows}}, "quick")}
    assert targets["keps_exact_title_r1_embedded"].met is True
    assert targets["keps_identifier_r1_embedded"].met is False
    assert targets["keps_identifier_r1_embedded"].figure == 0.975
    assert not any(t.startswith("keps_lookup") for t in targets)


def test_structured_targets_judge_100k_and_the_largest_size() -> None:
    def row(method: str, size: int, **metrics: float) -> dict[str, Any]:
        return {
            "suite": "structured",
            "dataset": "synthetic",
            "system": "uda",
            "method": method,
            "profile": "embedded",
            "metrics": metrics,
            "params": {"size": size},
        }

    small = [
        row("structured: relation path + date range", 10_000, wall_p50_ms=5.0),
        row("structured: page 50 / page 1", 10_000, p50_ratio=1.2),
    ]
    targets = {t.id: t for t in evaluate_targets({"structured": {"rows": small}}, "quick")}
    filtered = targets["structured_filter_p50_100k_embedded"]
    assert filtered.met is None  # the latency target is judged at 100k only
    assert "10,000" in filtered.detail
    assert targets["structured_page50_ratio_embedded"].met is True
    big = [
        *small,
        row("structured: relation path + date range", 100_000, wall_p50_ms=25.0),
        row("structured: page 50 / page 1", 100_000, p50_ratio=2.5),
    ]
    targets = {t.id: t for t in evaluate_targets({"structured": {"rows": big}}, "full")}
    assert targets["structured_filter_p50_100k_embedded"].met is False
    assert targets["structured_filter_p50_100k_embedded"].figure == 25.0
    assert targets["structured_page50_ratio_embedded"].met is False


def test_floor_matches_brute_force_and_respects_clearance() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owner = np.repeat(np.arange(20), 2)
    ranks = np.array([i % 4 for i in range(20)], dtype=np.int8)
    flat = FlatCorpus(
        vectors=vectors,
        owner=owner,
        asset_ids=[f"a{i}" for i in range(20)],
        asset_rank=ranks,
        asset_scope=[None] * 20,
        edges=[("a0", "p"), ("a2", "p")],
        node_rank={"p": 3},
        node_scope={"p": None},
    )
    floor = NumpyFloor(flat, bm25=False)
    query = vectors[5]
    dense_only = {"lexical": 0.0, "centrality": 0.0}
    hits = floor.search(
        query, "", limit=5, depth=0, weights=dense_only, clearance=Clearance.parse(["restricted"])
    )
    best = {}
    for row, score in enumerate(vectors @ query):
        best[int(owner[row])] = max(best.get(int(owner[row]), -9.0), float(score))
    expected = sorted(best, key=lambda a: -best[a])[:5]
    assert [h.element_id for h in hits] == [f"a{a}" for a in expected]
    public = floor.search(query, "", limit=20, depth=1, weights=dense_only)
    assert {h.element_id for h in public} == {f"a{i}" for i in range(20) if ranks[i] == 0}
    assert all(not h.context for h in public)  # "p" is restricted: never a public context node


def test_report_derives_ratios_and_judges_targets() -> None:
    method = "search limit 10 depth 2, query embedding excluded"

    def row(system: str, profile: str | None, p50: float) -> dict:
        return {
            "suite": "scale",
            "dataset": "synthetic",
            "system": system,
            "method": method,
            "profile": profile,
            "metrics": {"wall_p50_ms": p50, "wall_p95_ms": p50 * 2},
            "params": {"size": 100_000},
        }

    suites = {
        "scale": {
            "rows": [
                row("uda", "embedded", 20.0),
                row("siloed", "embedded", 120.0),
                row("floor", None, 5.0),
                row("txtai", None, 30.0),
            ]
        }
    }
    derive_ratios(suites)
    rows = suites["scale"]["rows"]
    assert rows[1]["metrics"]["ratio_to_uda_embedded"] == pytest.approx(6.0)
    assert rows[2]["metrics"]["ratio_to_uda_embedded"] == pytest.approx(0.25)
    assert "ratio_to_uda_server" not in rows[1]["metrics"]
    targets = {t.id: t for t in evaluate_targets(suites, "full")}
    assert targets["latency_100k_embedded"].met is True
    assert targets["faster_than_siloed_100k_embedded"].figure == pytest.approx(6.0)
    assert targets["within_3x_floor_100k_embedded"].figure == pytest.approx(4.0)
    assert targets["within_3x_floor_100k_embedded"].met is False
    assert targets["latency_100k_server"].met is None  # not measured, never guessed


def test_multihop_target_is_the_best_variant_and_shows_it_elsewhere() -> None:
    def gain(dataset: str, method: str, points: float) -> dict[str, object]:
        return {
            "suite": "multihop",
            "dataset": dataset,
            "system": "uda",
            "method": f"gain of {method} over dense",
            "profile": "embedded",
            "metrics": {"recall@5_points": points, "recall@2_points": 0.0},
        }

    rows = [
        gain("hipporag_musique", "dense+PPR w=1", 2.0),
        gain("hipporag_musique", "dense+PPR w=4", 5.5),
        gain("migres_2wiki", "dense+PPR w=4", 9.0),
        gain("migres_2wiki", "dense+PPR w=1", 1.0),
    ]
    targets = {t.id: t for t in evaluate_targets({"multihop": {"rows": rows}}, "quick")}
    target = targets["multihop_graph_gain"]
    assert target.figure == pytest.approx(5.5)
    assert target.met is True
    assert "dense+PPR w=1: +2.0" in target.detail
    assert target.detail.endswith("the best variant on the other sets: migres_2wiki +9.0")


def test_txtai_reproduction_is_judged_on_the_mean_over_indexing_orders() -> None:
    """One IVF build is one draw; the mean over orders is the figure, the spread the detail."""

    def row(system: str, method: str, metrics: dict[str, float]) -> dict[str, object]:
        return {
            "suite": "scifact",
            "dataset": "scifact",
            "system": system,
            "method": method,
            "profile": None,
            "metrics": metrics,
            "params": {"index_orders": 8} if system == "txtai" else {},
        }

    spread = {"ndcg@10_orders_sd": 0.0085, "ndcg@10_orders_min": 0.566}
    rows = [
        row(
            "txtai",
            "dense",
            {"ndcg@10": 0.574, "ndcg@10_orders_mean": 0.580, **spread, "ndcg@10_orders_max": 0.592},
        ),
        row(
            "txtai",
            "hybrid",
            {"ndcg@10": 0.660, "ndcg@10_orders_mean": 0.670, **spread, "ndcg@10_orders_max": 0.68},
        ),
        row("floor", "dense", {"ndcg@10": 0.645}),
    ]
    suites = {"scifact": {"rows": rows, "notes": ["scifact: 5183 passages, 300 queries"]}}
    targets = {t.id: t for t in evaluate_targets(suites, "full")}
    dense = targets["reproduce_scifact_txtai_dense"]
    assert dense.figure == pytest.approx(0.580)
    assert dense.met is True  # 0.580 is within 0.01 of 0.587; the single build 0.574 was not
    assert "mean of 8 indexing orders" in dense.detail
    assert "the corpus's own order 0.5740" in dense.detail
    assert targets["reproduce_scifact_txtai_hybrid"].met is False  # 0.670 vs 0.650
    assert targets["reproduce_scifact_floor_dense"].figure == pytest.approx(0.645)
    assert targets["reproduce_scifact_txtai_bm25"].met is None  # not run, never guessed


def test_floor_bm25_equals_uda_bm25_arithmetic() -> None:
    from connectors.analyzer import query_terms, term_frequencies
    from connectors.bm25 import bm25_top

    texts = [
        "Payment retries use an idempotency key.",
        "Retries of failed payments back off exponentially; payments are retried three times.",
        "The deploy schedule is weekly.",
        "Idempotency keys make payment retries safe.",
    ]
    flat = FlatCorpus(
        vectors=np.eye(4, dtype=np.float32),
        owner=np.arange(4),
        asset_ids=["a", "b", "c", "d"],
        asset_rank=np.zeros(4, dtype=np.int8),
        asset_scope=[None] * 4,
        texts=texts,
    )
    floor = NumpyFloor(flat)
    query = "payment retries idempotency"
    hits = floor.search(
        np.zeros(4, dtype=np.float32), query, limit=4, depth=0, weights={"semantic": 0.0}
    )
    wanted = set(query_terms(query))
    rows = []
    lengths = {i: sum(term_frequencies(t).values()) for i, t in enumerate(texts)}
    for i, text in enumerate(texts):
        for term, tf in term_frequencies(text).items():
            if term in wanted:
                rows.append((i, term, tf, lengths[i], "abcd"[i]))
    expected = bm25_top(rows, len(texts), sum(lengths.values()) / len(texts), 4)
    assert [h.element_id for h in hits] == [chunk for _, chunk, _ in expected]


class _CountingModel:
    """Test double of the sentence-transformers embedder: a vector from each text's hash."""

    dimension = 4

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = [
            np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.float32) for t in texts
        ]
        return np.stack(rows).astype(np.float32)


def test_vector_cache_keeps_vectors_per_model_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    model = _CountingModel()
    first = CachingEmbedder(model, disk=VectorCache(path, "model-a", 4))  # type: ignore[arg-type]
    vectors = first.embed_documents(["alpha", "beta", "alpha"])
    assert model.calls == [["alpha", "beta"]]
    assert (first.embedded, first.from_disk) == (2, 0)

    again = _CountingModel()
    second = CachingEmbedder(again, disk=VectorCache(path, "model-a", 4))  # type: ignore[arg-type]
    assert np.array_equal(second.embed_documents(["alpha", "beta", "alpha"]), vectors)
    assert again.calls == []
    assert (second.embedded, second.from_disk) == (0, 2)
    # A text not seen before goes to the model; the rest still come from disk.
    second.embed_documents(["beta", "gamma"])
    assert again.calls == [["gamma"]]

    # Other weights, other vectors: nothing is shared between model fingerprints.
    other = _CountingModel()
    third = CachingEmbedder(other, disk=VectorCache(path, "model-b", 4))  # type: ignore[arg-type]
    third.embed_documents(["alpha"])
    assert other.calls == [["alpha"]]


def test_model_fingerprint_changes_with_any_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 10)
    (tmp_path / "sub" / "config.json").write_text("{}")
    before = model_fingerprint(tmp_path)
    assert model_fingerprint(tmp_path) == before
    (tmp_path / "sub" / "config.json").write_text('{"x": 1}')
    assert model_fingerprint(tmp_path) != before
