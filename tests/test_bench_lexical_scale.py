"""`benchmarks.lexical_scale`: the suite end to end on a tiny corpus, its inputs and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import lexical_scale, model_free


def test_passages_and_queries_are_seeded_and_sized(tmp_path: Path) -> None:
    """The same files give the same passages; queries have the asked kind and count."""
    (tmp_path / "a.md").write_text(" ".join(f"word{i} alpha beta gamma" for i in range(200)))
    (tmp_path / "b.py").write_text(" ".join(f"token{i} delta" for i in range(300)))
    first = lexical_scale.passages(tmp_path, 8, words=40)
    assert first == lexical_scale.passages(tmp_path, 8, words=40)
    assert all(len(p.split()) == 40 for p in first)
    keywords = lexical_scale.queries(first, 5, "keywords", seed=1)
    questions = lexical_scale.queries(first, 5, "questions", seed=1)
    assert all(2 <= len(q.split()) <= 3 for q in keywords)
    assert all(len(q.split()) == 15 for q in questions)
    with pytest.raises(SystemExit, match="only"):
        lexical_scale.passages(tmp_path, 10_000, words=40)


@pytest.mark.parametrize("name", sorted(model_free.EMBEDDERS))
def test_a_model_free_embedder_gives_one_seeded_unit_vector_per_text(name: str) -> None:
    embedder = model_free.EMBEDDERS[name]()
    vectors = embedder.embed_documents(["one two", "three four", "one two"])
    assert vectors.shape == (3, model_free.DIMENSION)
    assert vectors[0].tolist() == vectors[2].tolist() != vectors[1].tolist()
    assert vectors[0].tolist() == model_free.EMBEDDERS[name]().embed_query("one two").tolist()
    norms = (vectors**2).sum(axis=1)
    assert norms.tolist() == pytest.approx([1.0, 1.0, 1.0], rel=1e-5)


def test_hashed_words_put_texts_that_share_words_nearer() -> None:
    """What the hashed vectors are for: neighbourhoods, which random vectors lack."""
    embedder = model_free.HashedWordsEmbedder()
    base, close, far = embedder.embed_documents(
        [
            "the planner fuses semantic and lexical ranks",
            "the planner fuses lexical ranks with graph centrality",
            "postgres replicas stream write ahead logs to standbys",
        ]
    )
    assert float(base @ close) > float(base @ far) + 0.2


@pytest.mark.parametrize("sizes", ["", "abc", "50", "300,x"])
def test_bad_sizes_are_refused_with_a_message(
    sizes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        lexical_scale.main(["--sizes", sizes])
    assert "--sizes" in capsys.readouterr().err


@pytest.mark.parametrize("vectors", ["", "uniform", "random,glove"])
def test_unknown_vectors_are_refused_naming_the_choices(
    vectors: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        lexical_scale.main(["--vectors", vectors])
    err = capsys.readouterr().err
    assert "--vectors" in err
    assert "random, hashed" in err


def test_the_suite_runs_end_to_end_and_writes_its_report(tmp_path: Path) -> None:
    """Every system measured for both query kinds; the summary names them."""
    out = tmp_path / "report"
    assert (
        lexical_scale.main(
            ["--sizes", "300", "--queries", "4", "--vectors", "hashed", "--out", str(out)]
        )
        == 0
    )
    report = json.loads((out / "report.json").read_text())
    (size,) = report["sizes"]
    assert size["passages"] == 300
    assert size["vectors"] == "hashed"
    assert size["chunks"] >= 300
    assert size["ingest_chunks_per_s"] > 0
    for kind in ("keywords", "questions"):
        row = size["kinds"][kind]
        for name in ("tantivy", "engine", "exhaustive", "vector", "search"):
            assert row[f"{name}_ms"]["p50"] > 0, (kind, name)
            assert row[f"{name}_cpu_ms"]["p50"] >= 0, (kind, name)
        assert "search_phase1_ms" in row
        # 300 vectors: the HNSW index's search is as good as exact.
        assert row["vector_recall"]["min"] == pytest.approx(1.0)
    summary = (out / "summary.md").read_text()
    assert "| 300 | " in summary
    assert "| hashed |" in summary
    assert "Tantivy k=100" in summary
    assert "recall@100" in summary
