"""Issue 20's targets in the benchmark report: judged on the untuned defaults, worst case."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.quality_targets import default_quality_targets
from benchmarks.targets import evaluate_targets


def _row(dataset: str, method: str, profile: str, **metrics: float) -> dict[str, Any]:
    return {
        "suite": "x",
        "dataset": dataset,
        "system": "uda",
        "method": method,
        "profile": profile,
        "metrics": metrics,
        "params": {},
    }


def _multihop(dataset: str, profile: str, **r5: float) -> list[dict[str, Any]]:
    names = {
        "dense": "dense",
        "bm25": "bm25",
        "variant": "dense+PPR w=4 +graph candidates",
        "defaults": "full pipeline",
        "tuned": "full pipeline after uda tune",
    }
    return [_row(dataset, names[k], profile, **{"recall@5": v}) for k, v in r5.items()]


def _suites(
    multihop: list[dict[str, Any]], scifact: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    suites: dict[str, Any] = {"multihop": {"rows": multihop}}
    if scifact is not None:
        suites["scifact"] = {"rows": scifact}
    return suites


def _by_id(suites: dict[str, Any]) -> dict[str, Any]:
    return {t.id: t for t in default_quality_targets(suites)}


def test_musique_is_judged_untuned_on_its_worst_profile() -> None:
    rows = _multihop("hipporag_musique", "embedded", dense=0.62, defaults=0.69, tuned=0.72)
    rows += _multihop("hipporag_musique", "server", dense=0.62, defaults=0.71, tuned=0.72)
    target = _by_id(_suites(rows))["defaults_hipporag_musique"]
    assert target.figure == pytest.approx(0.69)
    assert target.met is False
    assert "after `uda tune` 0.7200" in target.detail


def test_gaps_are_the_worst_set_and_profile_in_points() -> None:
    rows = _multihop("a", "embedded", dense=0.60, bm25=0.50, variant=0.70, defaults=0.69)
    rows += _multihop("b", "embedded", dense=0.80, bm25=0.81, variant=0.85, defaults=0.82)
    rows += _multihop("b", "server", dense=0.80, bm25=0.81, variant=0.85, defaults=0.835)
    found = _by_id(_suites(rows))
    leg = found["defaults_multihop_vs_best_leg"]
    assert leg.figure == pytest.approx(1.0)  # b embedded: 0.82 against BM25's 0.81
    assert leg.met is True
    assert leg.detail.startswith("worst: b (embedded) +1.0")
    variant = found["defaults_multihop_vs_best_variant"]
    assert variant.figure == pytest.approx(-3.0)
    assert variant.met is False
    assert "musique" not in str(found)  # no hipporag_musique rows: no target for it


@pytest.mark.parametrize(("defaults", "met"), [(0.685, True), (0.6849, False)])
def test_the_variant_target_allows_one_and_a_half_points(defaults: float, met: bool) -> None:
    rows = _multihop("a", "embedded", dense=0.60, variant=0.70, defaults=defaults)
    assert _by_id(_suites(rows))["defaults_multihop_vs_best_variant"].met is met


def test_a_defaults_row_that_loses_to_a_leg_misses() -> None:
    rows = _multihop("a", "embedded", dense=0.60, bm25=0.64, variant=0.70, defaults=0.63, tuned=0.7)
    target = _by_id(_suites(rows))["defaults_multihop_vs_best_leg"]
    assert target.figure == pytest.approx(-1.0)
    assert target.met is False
    assert "after `uda tune` worst: a (embedded) +6.0" in target.detail


def test_scifact_alone_gives_its_target_alone() -> None:
    scifact = [
        _row("scifact", "full pipeline", "embedded", **{"ndcg@10": 0.731}),
        _row("scifact", "full pipeline", "server", **{"ndcg@10": 0.729}),
        _row("scifact", "dense", "server", **{"ndcg@10": 0.65}),
    ]
    found = _by_id({"scifact": {"rows": scifact}})
    assert list(found) == ["defaults_scifact_ndcg"]
    assert found["defaults_scifact_ndcg"].figure == pytest.approx(0.729)
    assert found["defaults_scifact_ndcg"].met is False


def test_the_report_carries_them() -> None:
    rows = _multihop("hipporag_musique", "embedded", dense=0.62, variant=0.68, defaults=0.70)
    ids = [t.id for t in evaluate_targets(_suites(rows), "full")]
    assert "defaults_hipporag_musique" in ids
    assert "defaults_multihop_vs_best_variant" in ids
