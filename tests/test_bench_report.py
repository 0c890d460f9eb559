"""Merging benchmark reports: a long preset completed suite by suite, each suite kept whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.presets import SUITES
from benchmarks.report import (
    README_BEGIN,
    README_END,
    MergeError,
    markdown,
    merge_previous,
    previous,
    publish,
    summary_block,
)
from benchmarks.targets import evaluate_targets

MACHINE = {"cpu_model": "Test CPU", "cpu_count": 2, "git_commit": "1111111aaaa", "python": "3"}


def _suite(value: float, run: dict[str, Any] | None = None) -> dict[str, Any]:
    suite: dict[str, Any] = {
        "status": "ok",
        "reason": None,
        "wall_s": 10.0,
        "rows": [
            {
                "suite": "x",
                "dataset": "d",
                "system": "uda",
                "method": "m",
                "metrics": {"ndcg@10": value},
                "params": {},
            }
        ],
        "notes": [],
    }
    if run is not None:
        suite["run"] = run
    return suite


def _old_report(folder: Path, preset: str = "full") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    old = {
        "preset": preset,
        "profiles": ["embedded"],
        "started_at": "2026-11-20T10:00:00+00:00",
        "wall_s": 20.0,
        "machine": MACHINE,
        # Written before suites recorded their run: the report's run stands in.
        "suites": {"scale": _suite(1.0), "scifact": _suite(2.0)},
    }
    (folder / "report.json").write_text(json.dumps(old))


def test_merge_keeps_the_suites_this_run_did_not_run(tmp_path: Path) -> None:
    _old_report(tmp_path)
    run = {
        "started_at": "2026-11-21T09:00:00+00:00",
        "git_commit": "2222222bbbb",
        "cpu_model": "Test CPU",
        "cpu_count": 2,
    }
    new = {
        "preset": "full",
        "profiles": ["embedded", "server"],
        "started_at": run["started_at"],
        "wall_s": 5.0,
        "machine": {**MACHINE, "git_commit": "2222222bbbb"},
        "suites": {"multihop": _suite(3.0, run), "scale": _suite(4.0, run)},
    }
    merge_previous(new, previous(tmp_path, "full") or {}, order=SUITES)

    assert list(new["suites"]) == ["scifact", "multihop", "scale"]  # the preset's order
    assert new["merged"] == ["scifact"]
    assert new["suites"]["scale"]["rows"][0]["metrics"]["ndcg@10"] == 4.0  # this run's
    kept = new["suites"]["scifact"]
    assert kept["rows"][0]["metrics"]["ndcg@10"] == 2.0
    assert kept["run"]["git_commit"] == "1111111aaaa"
    assert kept["run"]["started_at"] == "2026-11-20T10:00:00+00:00"
    assert new["wall_s"] == pytest.approx(30.0)

    targets = evaluate_targets(new["suites"], "full")
    page = markdown(new, targets)
    assert "  - scifact: 2026-11-20T10:00:00+00:00, commit 1111111aaa" in page
    assert "  - multihop: 2026-11-21T09:00:00+00:00, commit 2222222bbb" in page
    assert "different machines" not in page
    block = summary_block(new, targets)
    assert "suites run 2026-11-20 to 2026-11-21" in block
    assert "commits 1111111aaa, 2222222bbb" in block


def test_merge_refuses_another_preset_and_starts_fresh_without_a_report(tmp_path: Path) -> None:
    assert previous(tmp_path / "nothing", "full") is None
    _old_report(tmp_path, preset="quick")
    with pytest.raises(MergeError, match="'quick' report, not 'full'"):
        previous(tmp_path, "full")
    (tmp_path / "report.json").write_text("{not json")
    with pytest.raises(MergeError, match="is not a report"):
        previous(tmp_path, "full")


def test_a_merged_report_says_when_its_runs_were_on_different_machines(tmp_path: Path) -> None:
    _old_report(tmp_path)
    run = {"started_at": "2026-11-21T09:00:00+00:00", "git_commit": "2", "cpu_count": 64}
    new = {
        "preset": "full",
        "profiles": ["embedded"],
        "started_at": run["started_at"],
        "wall_s": 5.0,
        "machine": MACHINE,
        "suites": {"scale": _suite(4.0, {**run, "cpu_model": "Big CPU"})},
    }
    merge_previous(new, previous(tmp_path, "full") or {}, order=SUITES)
    assert "different machines" in markdown(new, evaluate_targets(new["suites"], "full"))


def test_publish_writes_an_existing_reports_targets_into_a_readme(tmp_path: Path) -> None:
    fused = {
        "suite": "scifact",
        "dataset": "scifact",
        "system": "uda",
        "method": "dense+lexical",
        "profile": "embedded",
        "metrics": {"ndcg@10": 0.7012},
        "params": {"queries": 300},
    }
    # The stored targets are from an older definition: publish judges the rows again.
    stale = {"id": "gone", "description": "a target since removed", "target": "", "met": True}
    report = {
        "preset": "quick",
        "started_at": "2026-11-21T12:00:00+00:00",
        "wall_s": 60.0,
        "machine": {
            "cpu_model": "Test CPU",
            "cpu_count": 2,
            "python": "3.11",
            "git_commit": "abcdef1234567",
        },
        "profiles": ["embedded"],
        "suites": {"scifact": {"status": "ok", "rows": [fused], "notes": [], "wall_s": 9.0}},
        "targets": [stale],
    }
    folder = tmp_path / "results" / "quick"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(report))
    readme = tmp_path / "README.md"
    # Prose may name the markers; only markers on lines of their own delimit the summary.
    prose = f"the table goes between `{README_BEGIN}` and\n`{README_END}` below\n"
    readme.write_text(f"intro\n{prose}{README_BEGIN}\nold\n{README_END}\nrest\n")
    without_markers = tmp_path / "OTHER.md"
    without_markers.write_text(f"no markers of their own: `{README_BEGIN}` `{README_END}`\n")
    unchanged = without_markers.read_text()
    assert publish(folder / "report.json", [readme, without_markers]) == [readme]
    text = readme.read_text()
    assert "old" not in text
    assert text.startswith(f"intro\n{prose}{README_BEGIN}\n")
    assert text.endswith("rest\n")
    assert "Latest `quick` run: 2026-11-21 on Test CPU (2 CPUs), commit abcdef1234" in text
    assert "| 0.701 | met |" in text
    assert "since removed" not in text
    assert without_markers.read_text() == unchanged
    rewritten = json.loads((folder / "report.json").read_text())
    judged = {t["id"]: t for t in rewritten["targets"]}
    assert judged["scifact_ndcg_fused"]["figure"] == 0.7012
    assert "gone" not in judged
    assert "| 0.701 | met |" in (folder / "summary.md").read_text()
