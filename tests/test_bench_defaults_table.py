"""The report's "Defaults vs best variant vs best leg" table, from hand-built suite rows."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.defaults_table import TITLE, comparisons, report_rows, section
from benchmarks.report import markdown
from benchmarks.targets import evaluate_targets


def _row(
    dataset: str, method: str, metrics: dict[str, float], *, system: str = "uda", profile: Any
) -> dict[str, Any]:
    return {
        "suite": "x",
        "dataset": dataset,
        "system": system,
        "method": method,
        "profile": profile,
        "metrics": metrics,
        "params": {},
    }


def _multihop_rows() -> list[dict[str, Any]]:
    def uda(method: str, r5: float, r2: float, profile: str = "embedded") -> dict[str, Any]:
        return _row("musique", method, {"recall@5": r5, "recall@2": r2}, profile=profile)

    return [
        uda("bm25", 0.50, 0.42),
        uda("dense", 0.62, 0.40),
        uda("dense+PPR w=1", 0.64, 0.49),
        uda("dense+PPR w=4 +graph candidates", 0.68, 0.47),
        uda("full pipeline", 0.58, 0.44),
        uda("full pipeline", 0.70, 0.30, profile="server"),
        uda("dense", 0.60, 0.35, profile="server"),
        # Other systems and the derived rows never count, however high.
        _row(
            "musique", "dense", {"recall@5": 0.99, "recall@2": 0.99}, system="floor", profile=None
        ),
        _row(
            "musique",
            "gain of dense+PPR w=1 over dense",
            {"recall@5": 0.99, "recall@5_points": 2.0},
            profile="embedded",
        ),
    ]


def test_multihop_defaults_against_best_leg_and_best_variant() -> None:
    found = {(c.profile, c.metric): c for c in comparisons("multihop", _multihop_rows())}
    assert list(found) == [
        ("embedded", "recall@5"),
        ("embedded", "recall@2"),
        ("server", "recall@5"),
        ("server", "recall@2"),
    ]

    r5 = found[("embedded", "recall@5")]
    assert (r5.defaults, r5.best_leg, r5.best_leg_figure) == (0.58, "dense", 0.62)
    assert (r5.best_variant, r5.best_variant_figure) == ("dense+PPR w=4 +graph candidates", 0.68)
    assert r5.leg_points == pytest.approx(-4.0)
    assert r5.variant_points == pytest.approx(-10.0)

    r2 = found[("embedded", "recall@2")]  # a different leg and variant win at Recall@2
    assert (r2.best_leg, r2.best_variant) == ("bm25", "dense+PPR w=1")
    assert r2.leg_points == pytest.approx(2.0)
    assert r2.variant_points == pytest.approx(-5.0)

    server = found[("server", "recall@5")]  # only one leg and no variant ran there
    assert (server.best_leg, server.best_variant, server.variant_points) == ("dense", None, None)
    assert server.leg_points == pytest.approx(10.0)


def test_scifact_ignores_rows_without_the_metric_and_needs_the_defaults() -> None:
    rows = [
        _row("scifact", "bm25", {"ndcg@10": 0.66}, profile="embedded"),
        _row("scifact", "dense", {"ndcg@10": 0.64}, profile="embedded"),
        _row("scifact", "dense+lexical", {"ndcg@10": 0.69}, profile="embedded"),
        _row("scifact", "full pipeline", {"ndcg@10": 0.685}, profile="embedded"),
        _row("scifact", "graph-leg guard", {"full_ndcg@10": 0.9}, profile="embedded"),
        _row("scifact", "dense", {"ndcg@10": 0.64}, profile="server"),  # no defaults: no row
    ]
    (only,) = comparisons("scifact", rows)
    assert (only.profile, only.metric, only.best_leg, only.best_variant) == (
        "embedded",
        "ndcg@10",
        "bm25",
        "dense+lexical",
    )
    assert only.variant_points == pytest.approx(-0.5)
    lines = section("scifact", rows)
    assert lines[0] == f"### {TITLE}"
    assert (
        "| scifact | embedded | ndcg@10 | 0.685 | 0.660 (bm25) | 0.690 (dense+lexical) "
        "| +2.5 | -0.5 |" in lines
    )
    assert section("scale", rows) == []  # other suites have no such table
    assert section("scifact", rows[1:2]) == []  # nor a set without its defaults


def test_the_report_shows_the_table_in_its_suite_and_the_json_rows() -> None:
    suites = {
        "multihop": {
            "status": "ok",
            "reason": None,
            "wall_s": 1.0,
            "rows": _multihop_rows(),
            "notes": [],
        },
        "scale": {"status": "ok", "reason": None, "wall_s": 1.0, "rows": [], "notes": []},
    }
    report = {
        "preset": "smoke",
        "profiles": ["embedded", "server"],
        "started_at": "2026-11-21T09:00:00+00:00",
        "wall_s": 2.0,
        "machine": {"cpu_model": "Test CPU", "cpu_count": 2, "python": "3", "platform": "x"},
        "suites": suites,
    }
    text = markdown(report, evaluate_targets(suites, "smoke"))
    multihop = text.split("## multihop", 1)[1].split("## scale", 1)[0]
    assert f"### {TITLE}" in multihop
    assert (
        "| musique | embedded | recall@5 | 0.580 | 0.620 (dense) "
        "| 0.680 (dense+PPR w=4 +graph candidates) | -4.0 | -10.0 |" in multihop
    )
    assert text.count(f"### {TITLE}") == 1

    json_rows = report_rows(suites)
    assert len(json_rows) == 4
    assert json_rows[0]["suite"] == "multihop"
    assert json_rows[0]["best_variant"] == "dense+PPR w=4 +graph candidates"
    assert json_rows[0]["defaults_minus_best_leg_points"] == pytest.approx(-4.0)


def test_the_tuned_defaults_are_their_own_column_and_never_the_best_variant() -> None:
    rows = [
        *_multihop_rows(),
        _row(
            "musique",
            "full pipeline after uda tune",
            {"recall@5": 0.75, "recall@2": 0.45},
            profile="embedded",
        ),
    ]
    found = {(c.profile, c.metric): c for c in comparisons("multihop", rows)}
    r5 = found[("embedded", "recall@5")]
    assert r5.tuned == 0.75
    assert r5.best_variant == "dense+PPR w=4 +graph candidates"  # not the tuned defaults
    assert r5.tuned_variant_points == pytest.approx(7.0)
    assert r5.tuned_leg_points == pytest.approx(13.0)
    assert found[("server", "recall@5")].tuned is None
    lines = section("multihop", rows)
    assert any("after `uda tune`" in line for line in lines)
    assert any("| 0.750 |" in line for line in lines)
    assert report_rows({"multihop": {"rows": rows}})[0]["after_uda_tune"] == 0.75
    untuned = section("multihop", _multihop_rows())
    assert not any("after `uda tune`" in line for line in untuned if line.startswith("|"))
