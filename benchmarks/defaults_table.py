"""Defaults vs best variant vs best leg: how far UDA's default pipeline is from its best
configuration on each quality set, per profile.

For each dataset, profile and main metric (Recall@5 and Recall@2 on the multi-hop sets,
nDCG@10 on SciFact), from the suite's UDA rows: the default pipeline ("full pipeline"),
the default pipeline after `uda tune` when the suite ran it (tuned on pseudo-queries built
from the store, never on the test questions), the best single leg (dense or BM25) and the
best variant (every other UDA method with the metric, the "gain of ..." rows left out),
each named, and the differences in points (100 x the metric) of the defaults and of the
tuned defaults from the best leg and the best variant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TITLE = "Defaults vs best variant vs best leg"
MEASURES: dict[str, tuple[str, ...]] = {
    "multihop": ("recall@5", "recall@2"),
    "scifact": ("ndcg@10",),
}
DEFAULTS = "full pipeline"
TUNED = "full pipeline after uda tune"
LEGS = ("dense", "bm25")
GAIN_PREFIX = "gain of "


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One dataset, profile and metric: the defaults against the best leg and variant."""

    suite: str
    dataset: str
    profile: str
    metric: str
    defaults: float
    best_leg: str | None
    best_leg_figure: float | None
    best_variant: str | None
    best_variant_figure: float | None
    tuned: float | None = None  # the defaults after `uda tune` (None: not run)

    @property
    def leg_points(self) -> float | None:
        """Defaults minus the best leg, in points (None without a leg)."""
        if self.best_leg_figure is None:
            return None
        return 100 * (self.defaults - self.best_leg_figure)

    @property
    def variant_points(self) -> float | None:
        """Defaults minus the best variant, in points (None without a variant)."""
        if self.best_variant_figure is None:
            return None
        return 100 * (self.defaults - self.best_variant_figure)

    @property
    def tuned_leg_points(self) -> float | None:
        """The tuned defaults minus the best leg, in points."""
        if self.tuned is None or self.best_leg_figure is None:
            return None
        return 100 * (self.tuned - self.best_leg_figure)

    @property
    def tuned_variant_points(self) -> float | None:
        """The tuned defaults minus the best variant, in points."""
        if self.tuned is None or self.best_variant_figure is None:
            return None
        return 100 * (self.tuned - self.best_variant_figure)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready fields, with both differences."""
        return {
            "suite": self.suite,
            "dataset": self.dataset,
            "profile": self.profile,
            "metric": self.metric,
            "defaults": self.defaults,
            "best_leg": self.best_leg,
            "best_leg_figure": self.best_leg_figure,
            "best_variant": self.best_variant,
            "best_variant_figure": self.best_variant_figure,
            "defaults_minus_best_leg_points": self.leg_points,
            "defaults_minus_best_variant_points": self.variant_points,
            "after_uda_tune": self.tuned,
            "after_uda_tune_minus_best_leg_points": self.tuned_leg_points,
            "after_uda_tune_minus_best_variant_points": self.tuned_variant_points,
        }


def _best(figures: Mapping[str, float]) -> tuple[str | None, float | None]:
    """The method with the highest figure (the first of equals, in row order)."""
    if not figures:
        return None, None
    name = max(figures, key=lambda m: figures[m])
    return name, figures[name]


def comparisons(suite: str, rows: Sequence[Mapping[str, Any]]) -> list[Comparison]:
    """The comparisons of one suite's rows, by dataset and profile in row order.

    A dataset and profile without a default-pipeline figure for the metric has no row.
    """
    metrics = MEASURES.get(suite, ())
    figures: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for r in rows:
        method = str(r["method"])
        if r.get("system") != "uda" or not r.get("profile") or method.startswith(GAIN_PREFIX):
            continue
        group = figures.setdefault((str(r["dataset"]), str(r["profile"])), {})
        for metric in metrics:
            value = r["metrics"].get(metric)
            if isinstance(value, int | float) and value == value:  # not NaN
                group.setdefault(metric, {})[method] = float(value)
    out: list[Comparison] = []
    for (dataset, profile), by_metric in figures.items():
        for metric in metrics:
            methods = by_metric.get(metric, {})
            if DEFAULTS not in methods:
                continue
            leg, leg_figure = _best({m: v for m, v in methods.items() if m in LEGS})
            variant, variant_figure = _best(
                {m: v for m, v in methods.items() if m not in (DEFAULTS, TUNED, *LEGS)}
            )
            out.append(
                Comparison(
                    suite=suite,
                    dataset=dataset,
                    profile=profile,
                    metric=metric,
                    defaults=methods[DEFAULTS],
                    best_leg=leg,
                    best_leg_figure=leg_figure,
                    best_variant=variant,
                    best_variant_figure=variant_figure,
                    tuned=methods.get(TUNED),
                )
            )
    return out


def _figure(value: float | None, name: str | None = None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" + (f" ({name})" if name else "")


def _points(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}"


def table(compared: Sequence[Comparison]) -> list[str]:
    """The comparisons as a Markdown table; no lines when there are none."""
    if not compared:
        return []
    tuned = any(c.tuned is not None for c in compared)
    head = (
        "dataset",
        "profile",
        "metric",
        "defaults",
        *(("after `uda tune`",) if tuned else ()),
        "best leg",
        "best variant",
        "defaults - best leg (points)",
        "defaults - best variant (points)",
        *(("tuned - best leg", "tuned - best variant") if tuned else ()),
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in compared:
        cells = (
            c.dataset,
            c.profile,
            c.metric,
            _figure(c.defaults),
            *((_figure(c.tuned),) if tuned else ()),
            _figure(c.best_leg_figure, c.best_leg),
            _figure(c.best_variant_figure, c.best_variant),
            _points(c.leg_points),
            _points(c.variant_points),
            *((_points(c.tuned_leg_points), _points(c.tuned_variant_points)) if tuned else ()),
        )
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def section(suite: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The titled table for one suite's summary section; no lines when it has none."""
    lines = table(comparisons(suite, rows))
    if not lines:
        return []
    return [
        f"### {TITLE}",
        "",
        f"UDA's default pipeline (`{DEFAULTS}`) against its best single leg "
        f"({' or '.join(LEGS)}) and its best other variant; differences in points "
        "(100 x the metric), negative when the defaults are behind. Where the suite ran it, "
        f"`{TUNED}` is the default pipeline once `uda tune` has chosen the graph's weight on "
        "pseudo-queries built from the store (no test question is seen; ADR 38). The "
        "defaults' own PageRank weight (16) was chosen across sets: for every set, it is "
        "the weight of `uda tune`'s grid with the best Recall@5 on the other four sets' "
        "questions (ADR 45).",
        "",
        *lines,
        "",
    ]


def report_rows(suites: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every suite's comparisons as JSON-ready rows, for the report."""
    return [
        c.to_dict()
        for suite in MEASURES
        for c in comparisons(suite, suites.get(suite, {}).get("rows") or [])
    ]


__all__ = ["TITLE", "TUNED", "Comparison", "comparisons", "report_rows", "section", "table"]
