"""PNG plots of a report (matplotlib, Agg backend): latency vs corpus size, quality per method."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.targets import params as _params

COLOURS = {"uda": "tab:blue", "floor": "tab:gray", "txtai": "tab:orange", "siloed": "tab:red"}


def plots(report: Mapping[str, Any], out: Path) -> list[str]:
    """latency_vs_size.png and quality.png (Agg backend); returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[str] = []
    rows = [r for s in report["suites"].values() for r in s["rows"]]
    method = "search limit 10 depth 2, query embedding excluded"
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r["suite"] == "scale" and r["method"] == method and "wall_p50_ms" in r["metrics"]:
            label = r["system"] + (f" ({r['profile']})" if r.get("profile") else "")
            series.setdefault(label, []).append(
                (int(_params(r, "size")), r["metrics"]["wall_p50_ms"])
            )
    if series:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, points in sorted(series.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("corpus size (chunks)")
        ax.set_ylabel("p50 latency (ms), limit 10, depth 2, embedding excluded")
        ax.set_title("Search latency vs corpus size")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "latency_vs_size.png", dpi=120)
        plt.close(fig)
        written.append("latency_vs_size.png")
    panels: list[tuple[str, str, list[tuple[str, float]]]] = []
    main = {"scifact": "ndcg@10", "multihop": "recall@5"}
    datasets: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for r in rows:
        metric = main.get(r["suite"])
        if metric and metric in r["metrics"] and not str(r["method"]).startswith("gain"):
            label = f"{r['system']}: {r['method']}" + (
                f" [{r['profile']}]" if r.get("profile") and r["profile"] != "embedded" else ""
            )
            datasets.setdefault((r["dataset"], metric), []).append((label, r["metrics"][metric]))
    panels = [(d, m, v) for (d, m), v in sorted(datasets.items())]
    if panels:
        height = max(3.0, 0.28 * max(len(v) for _, _, v in panels) + 1.2)
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, height * len(panels)), squeeze=False)
        for ax, (dataset, metric, values) in zip(axes[:, 0], panels, strict=True):
            labels = [v[0] for v in values]
            colours = [COLOURS.get(v[0].split(":")[0], "tab:gray") for v in values]
            ax.barh(range(len(values)), [v[1] for v in values], color=colours)
            ax.set_yticks(range(len(values)), labels, fontsize=7)
            ax.invert_yaxis()
            ax.set_xlim(0, 1)
            ax.set_title(f"{dataset}: {metric}", fontsize=9)
            for i, v in enumerate(values):
                ax.text(min(v[1] + 0.01, 0.92), i, f"{v[1]:.3f}", va="center", fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "quality.png", dpi=120)
        plt.close(fig)
        written.append("quality.png")
    return written
